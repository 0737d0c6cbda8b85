// cosrecorder runs the real kube-scheduler v1.35.4 with scheduler-plugins' Coscheduling (both
// as vendored in openshift-kni/scheduler-plugins e0b47cde) against client-go's fake clientset
// and a fake dynamic client holding the PodGroups (scheduling.x-k8s.io/v1alpha1), with the
// scenario's KubeSchedulerConfiguration (config.yaml, decoded as the scheduler's own config
// loader decodes it). It creates the objects of the scenario's steps.yaml one at a time, a
// fixed gap after each, and writes what the scheduler decided.
//
// usage: cosrecorder <scenario-dir> <out-dir> <gap-seconds>
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"
	corev1defaults "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/pkg/scheduler"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/profile"
)

type item struct {
	raw  []byte
	kind string
}

func readList(path string) []item {
	data, err := os.ReadFile(path)
	must(err)
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	js, err := utilyaml.ToJSON(data)
	must(err)
	must(json.Unmarshal(js, &list))
	var out []item
	for _, raw := range list.Items {
		var meta struct {
			Kind string `json:"kind"`
		}
		must(json.Unmarshal(raw, &meta))
		out = append(out, item{raw: raw, kind: meta.Kind})
	}
	return out
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "cosrecorder:", err)
		os.Exit(1)
	}
}

var (
	rvMu sync.Mutex
	rv   int
	uid  int
)

func nextRV() string {
	rvMu.Lock()
	defer rvMu.Unlock()
	rv++
	return fmt.Sprint(rv)
}

func nextUID() types.UID {
	rvMu.Lock()
	defer rvMu.Unlock()
	uid++
	return types.UID(fmt.Sprintf("uid-%04d", uid))
}

func stamp(m *metav1.ObjectMeta) {
	if m.Namespace == "" {
		m.Namespace = "default"
	}
	m.UID = nextUID()
	m.CreationTimestamp = metav1.NewTime(time.Now().Truncate(time.Second))
	m.Generation = 1
}

func main() {
	klog.InitFlags(nil)
	flag.Parse()
	args := flag.Args()
	if len(args) != 3 {
		must(fmt.Errorf("usage: cosrecorder <scenario-dir> <out-dir> <gap-seconds>"))
	}
	dir, outDir := args[0], args[1]
	var gapSeconds int
	_, err := fmt.Sscan(args[2], &gapSeconds)
	must(err)
	gap := time.Duration(gapSeconds) * time.Second
	must(os.MkdirAll(outDir, 0o755))

	var gates []string
	for name, spec := range utilfeature.DefaultMutableFeatureGate.GetAll() {
		if strings.HasPrefix(string(name), "All") {
			continue
		}
		_ = spec
		gates = append(gates, fmt.Sprintf("%s=%v", name, utilfeature.DefaultFeatureGate.Enabled(name)))
	}
	sort.Strings(gates)
	must(os.WriteFile(filepath.Join(outDir, "gates.txt"), []byte(strings.Join(gates, "\n")+"\n"), 0o644))

	client := fake.NewClientset()
	tracker := client.Tracker()
	// pods/binding as the API server does it: UID precondition, conflict if bound, set
	// nodeName and PodScheduled=True, clear nominatedNodeName.
	client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		create := action.(clienttesting.CreateAction)
		if create.GetSubresource() != "binding" {
			return false, nil, nil
		}
		binding := create.GetObject().(*v1.Binding)
		obj, err := tracker.Get(v1.SchemeGroupVersion.WithResource("pods"), binding.Namespace, binding.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*v1.Pod).DeepCopy()
		if binding.UID != "" && binding.UID != pod.UID {
			return true, nil, fmt.Errorf("binding uid mismatch")
		}
		if pod.Spec.NodeName != "" {
			return true, nil, fmt.Errorf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName)
		}
		pod.Spec.NodeName = binding.Target.Name
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		set := false
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == v1.PodScheduled {
				pod.Status.Conditions[i] = v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now}
				set = true
			}
		}
		if !set {
			pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now})
		}
		pod.Status.NominatedNodeName = ""
		pod.ResourceVersion = nextRV()
		return true, binding, tracker.Update(v1.SchemeGroupVersion.WithResource("pods"), pod, pod.Namespace)
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Built-ins.
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		n := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"kubernetes.io/metadata.name": ns}}}
		stamp(&n.ObjectMeta)
		n.Namespace = ""
		n.ResourceVersion = nextRV()
		_, err := client.CoreV1().Namespaces().Create(ctx, n, metav1.CreateOptions{})
		must(err)
	}
	priorities := map[string]int32{"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
	for name, value := range priorities {
		policy := v1.PreemptLowerPriority
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, PreemptionPolicy: &policy}
		stamp(&pc.ObjectMeta)
		pc.Namespace = ""
		_, err := client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{})
		must(err)
	}

	for _, it := range readList(filepath.Join(dir, "cluster.yaml")) {
		switch it.kind {
		case "Node":
			var n v1.Node
			must(json.Unmarshal(it.raw, &n))
			corev1defaults.SetObjectDefaults_Node(&n)
			stamp(&n.ObjectMeta)
			n.Namespace = ""
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			n.Labels["kubernetes.io/hostname"] = n.Name
			n.ResourceVersion = nextRV()
			_, err := client.CoreV1().Nodes().Create(ctx, &n, metav1.CreateOptions{})
			must(err)
		case "PriorityClass":
			var pc schedulingv1.PriorityClass
			must(json.Unmarshal(it.raw, &pc))
			if pc.PreemptionPolicy == nil {
				policy := v1.PreemptLowerPriority
				pc.PreemptionPolicy = &policy
			}
			priorities[pc.Name] = pc.Value
			stamp(&pc.ObjectMeta)
			pc.Namespace = ""
			_, err := client.SchedulingV1().PriorityClasses().Create(ctx, &pc, metav1.CreateOptions{})
			must(err)
		default:
			must(fmt.Errorf("cluster.yaml: kind %s not handled", it.kind))
		}
	}

	// The configuration, decoded as cmd/kube-scheduler/app/options' loadConfig decodes a
	// file (scheduler-plugins' scheme registered, so CoschedulingArgs are defaulted).
	data, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
	must(err)
	obj, _, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	must(err)
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	if !ok {
		must(fmt.Errorf("config.yaml: not a KubeSchedulerConfiguration"))
	}
	// PodGroups live in a fake dynamic client: the scheduler's informers watch them for
	// Coscheduling's registered events, and the plugin reads them through podGroupReader.
	pgScheme := runtime.NewScheme()
	must(v1alpha1.AddToScheme(pgScheme))
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(pgScheme,
		map[schema.GroupVersionResource]string{podGroupsGVR: "PodGroupList"})
	dynInformerFactory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	reader := &podGroupReader{dyn: dyn}
	registry := frameworkruntime.Registry{
		coscheduling.Name: func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return coscheduling.NewWithReader(ctx, args, h, reader)
		},
	}
	informerFactory := scheduler.NewInformerFactory(client, 0)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	recorderFactory := profile.NewRecorderFactory(broadcaster)
	sched, err := scheduler.New(ctx, client, informerFactory, dynInformerFactory, recorderFactory,
		scheduler.WithComponentConfigVersion("kubescheduler.config.k8s.io/v1"),
		scheduler.WithFrameworkOutOfTreeRegistry(registry),
		scheduler.WithProfiles(cfg.Profiles...),
		scheduler.WithPercentageOfNodesToScore(cfg.PercentageOfNodesToScore),
		scheduler.WithPodInitialBackoffSeconds(cfg.PodInitialBackoffSeconds),
		scheduler.WithPodMaxBackoffSeconds(cfg.PodMaxBackoffSeconds),
		scheduler.WithParallelism(cfg.Parallelism),
	)
	must(err)
	broadcaster.StartRecordingToSink(ctx.Done())
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	dynInformerFactory.Start(ctx.Done())
	dynInformerFactory.WaitForCacheSync(ctx.Done())
	must(sched.WaitForHandlersSync(ctx))
	go sched.Run(ctx)

	var _ informers.SharedInformerFactory = informerFactory
	steps := readList(filepath.Join(dir, "steps.yaml"))
	var order []string // "Pod ns/name" / "PodGroup ns/name"
	stepsOut, err := os.Create(filepath.Join(outDir, "steps.jsonl"))
	must(err)
	defer stepsOut.Close()
	for i, it := range steps {
		var created string
		switch it.kind {
		case "Pod":
			var p v1.Pod
			must(json.Unmarshal(it.raw, &p))
			corev1defaults.SetObjectDefaults_Pod(&p)
			stamp(&p.ObjectMeta)
			// Priority admission.
			if p.Spec.PriorityClassName != "" {
				value, ok := priorities[p.Spec.PriorityClassName]
				if !ok {
					must(fmt.Errorf("pod %s: no PriorityClass %s", p.Name, p.Spec.PriorityClassName))
				}
				p.Spec.Priority = &value
			} else {
				zero := int32(0)
				p.Spec.Priority = &zero
			}
			policy := v1.PreemptLowerPriority
			p.Spec.PreemptionPolicy = &policy
			// DefaultTolerationSeconds.
			secs := int64(300)
			p.Spec.Tolerations = append(p.Spec.Tolerations,
				v1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &secs},
				v1.Toleration{Key: "node.kubernetes.io/unreachable", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &secs})
			p.Status.Phase = v1.PodPending
			p.Status.QOSClass = v1.PodQOSBurstable
			p.ResourceVersion = nextRV()
			_, err := client.CoreV1().Pods(p.Namespace).Create(ctx, &p, metav1.CreateOptions{})
			must(err)
			created = "Pod " + p.Namespace + "/" + p.Name
		case "PodGroup":
			var g v1alpha1.PodGroup
			must(json.Unmarshal(it.raw, &g))
			stamp(&g.ObjectMeta)
			g.ResourceVersion = nextRV()
			g.APIVersion, g.Kind = "scheduling.x-k8s.io/v1alpha1", "PodGroup"
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&g)
			must(err)
			_, err = dyn.Resource(podGroupsGVR).Namespace(g.Namespace).Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{})
			must(err)
			created = "PodGroup " + g.Namespace + "/" + g.Name
		default:
			must(fmt.Errorf("steps.yaml: kind %s not handled", it.kind))
		}
		order = append(order, created)
		time.Sleep(gap)
		pods, _ := snapshot(ctx, client, order)
		groups := []orderedMap{}
		fmt.Fprintln(stepsOut, pyjson(om("step", i, "created", created, "pods", pods, "podGroups", groups)))
	}
	// Members waiting at Permit time out after their group's scheduleTimeoutSeconds: the
	// last snapshot is taken once the scenario's settle time has passed.
	time.Sleep(settle(dir))
	pods, groups := snapshot(ctx, client, order)
	expected, err := os.Create(filepath.Join(outDir, "expected.jsonl"))
	must(err)
	for _, p := range pods {
		fmt.Fprintln(expected, pyjson(p))
	}
	for _, g := range groups {
		fmt.Fprintln(expected, pyjson(g))
	}
	must(expected.Close())
	evs, err := client.EventsV1().Events("").List(ctx, metav1.ListOptions{})
	must(err)
	sort.SliceStable(evs.Items, func(a, b int) bool {
		return evs.Items[a].EventTime.Before(&evs.Items[b].EventTime)
	})
	evOut, err := os.Create(filepath.Join(outDir, "events.jsonl"))
	must(err)
	for _, e := range evs.Items {
		fmt.Fprintln(evOut, pyjson(eventLine(e)))
	}
	must(evOut.Close())
}

type orderedMap struct {
	keys   []string
	values map[string]any
}

func om(kv ...any) orderedMap {
	m := orderedMap{values: map[string]any{}}
	for i := 0; i < len(kv); i += 2 {
		k := kv[i].(string)
		m.keys = append(m.keys, k)
		m.values[k] = kv[i+1]
	}
	return m
}

// pyjson writes JSON with Python json.dumps' separators, keys in the given order.
func pyjson(v any) string {
	switch t := v.(type) {
	case orderedMap:
		var parts []string
		for _, k := range t.keys {
			kj, _ := json.Marshal(k)
			parts = append(parts, string(kj)+": "+pyjson(t.values[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []orderedMap:
		var parts []string
		for _, e := range t {
			parts = append(parts, pyjson(e))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

func eventLine(e eventsv1.Event) orderedMap {
	return om("regarding", e.Regarding.Kind+" "+e.Regarding.Namespace+"/"+e.Regarding.Name, "reason", e.Reason, "note", e.Note)
}

func snapshot(ctx context.Context, client *fake.Clientset, order []string) ([]orderedMap, []orderedMap) {
	var pods, groups []orderedMap
	for _, entry := range order {
		kind, key, _ := strings.Cut(entry, " ")
		ns, name, _ := strings.Cut(key, "/")
		switch kind {
		case "Pod":
			p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			must(err)
			var node, reason any
			if p.Spec.NodeName != "" {
				node = p.Spec.NodeName
			}
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
					reason = c.Message
				}
			}
			pods = append(pods, om("pod", key, "node", node, "reason", reason))
		}
	}
	return pods, groups
}

var podGroupsGVR = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}

// podGroupReader is the controller-runtime client Coscheduling reads PodGroups with: Get
// from the fake dynamic client; the plugin calls nothing else.
type podGroupReader struct {
	ctrlclient.Client
	dyn dynamic.Interface
}

func (r *podGroupReader) Get(ctx context.Context, key ctrlclient.ObjectKey, obj ctrlclient.Object, _ ...ctrlclient.GetOption) error {
	u, err := r.dyn.Resource(podGroupsGVR).Namespace(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if _, ok := obj.(*v1alpha1.PodGroup); !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("podGroupReader reads PodGroups, not %T", obj))
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
}

// settle reads the seconds to wait after the last step from the scenario's settle.txt
// (default 0).
func settle(dir string) time.Duration {
	data, err := os.ReadFile(filepath.Join(dir, "settle.txt"))
	if err != nil {
		return 0
	}
	var seconds int
	_, err = fmt.Sscan(string(data), &seconds)
	must(err)
	return time.Duration(seconds) * time.Second
}
