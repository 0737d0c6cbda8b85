// recorder runs the real kube-scheduler v1.36.3 (vendored in kueue ff69552e) against
// client-go's fake clientset, creates the objects of a scenario's steps.yaml (Pods,
// PodGroups, Nodes) one at a time (a fixed gap after each; 0 for a burst), and writes what
// the scheduler decided: the state after each step, the final state, the events, and every
// binding in the order it was made, with milliseconds since the first step.
//
// usage: recorder [-gates NAME=BOOL,...] [-config FILE] [-settle SECONDS] <scenario-dir> <out-dir> <gap>
//
// <gap> is whole seconds ("10") or a Go duration ("500ms").
//
// -gates sets feature gates over v1.36's defaults (the gang corpus used
// GenericWorkload=true,GangScheduling=true); -config is a KubeSchedulerConfiguration read
// as kube-scheduler reads its --config (decoded, defaulted, validated); -settle is a further
// wait after the last step's gap before the final state is read.
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	eventsv1 "k8s.io/api/events/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedv1a2 "k8s.io/api/scheduling/v1alpha2"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	corev1defaults "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/pkg/scheduler"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
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
		fmt.Fprintln(os.Stderr, "recorder:", err)
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
	// A uid the input gives is kept (an owner reference may name it).
	if m.UID == "" {
		m.UID = nextUID()
	}
	m.CreationTimestamp = metav1.NewTime(time.Now().Truncate(time.Second))
	m.Generation = 1
}

func main() {
	klog.InitFlags(nil)
	gateFlag := flag.String("gates", "", "feature gates NAME=BOOL,... over v1.36's defaults")
	configFlag := flag.String("config", "", "a KubeSchedulerConfiguration file")
	settleFlag := flag.Int("settle", 0, "seconds to wait after the last step's gap before the final state is read")
	driverFlag := flag.String("driver-binding", "", "an emulated DRA driver answering binding conditions: ready or fail (default: none answers)")
	flag.Parse()
	args := flag.Args()
	if len(args) != 3 {
		must(fmt.Errorf("usage: recorder [-gates NAME=BOOL,...] [-config FILE] [-settle SECONDS] <scenario-dir> <out-dir> <gap>"))
	}
	dir, outDir := args[0], args[1]
	// The gap: whole seconds ("10"), or a Go duration ("500ms").
	gap, err := time.ParseDuration(args[2])
	if err != nil {
		var gapSeconds int
		_, err = fmt.Sscan(args[2], &gapSeconds)
		must(err)
		gap = time.Duration(gapSeconds) * time.Second
	}
	settle := time.Duration(*settleFlag) * time.Second
	must(os.MkdirAll(outDir, 0o755))

	gates := map[string]bool{}
	for _, kv := range strings.Split(*gateFlag, ",") {
		if kv == "" {
			continue
		}
		name, value, ok := strings.Cut(kv, "=")
		if !ok || (value != "true" && value != "false") {
			must(fmt.Errorf("-gates: %q is not NAME=true or NAME=false", kv))
		}
		gates[name] = value == "true"
	}
	must(utilfeature.DefaultMutableFeatureGate.SetFromMap(gates))
	var gateValues []string
	for name := range utilfeature.DefaultMutableFeatureGate.GetAll() {
		if strings.HasPrefix(string(name), "All") {
			continue
		}
		gateValues = append(gateValues, fmt.Sprintf("%s=%v", name, utilfeature.DefaultFeatureGate.Enabled(name)))
	}
	sort.Strings(gateValues)
	must(os.WriteFile(filepath.Join(outDir, "gates.txt"), []byte(strings.Join(gateValues, "\n")+"\n"), 0o644))

	start := time.Now()
	bindsOut, err := os.Create(filepath.Join(outDir, "binds.jsonl"))
	must(err)
	defer bindsOut.Close()
	var bindsMu sync.Mutex

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
		bindsMu.Lock()
		fmt.Fprintln(bindsOut, pyjson(om("pod", pod.Namespace+"/"+pod.Name, "node", binding.Target.Name,
			"ms", time.Since(start).Milliseconds())))
		bindsMu.Unlock()
		return true, binding, tracker.Update(v1.SchemeGroupVersion.WithResource("pods"), pod, pod.Namespace)
	})

	// metadata.generateName as the API server does it (the fake tracker does not): the
	// base cut to 58 bytes and five random characters. DynamicResources' PreBind creates
	// the claim for a pod's extended resources backed by devices (DRAExtendedResource)
	// this way.
	client.PrependReactor("create", "resourceclaims", func(action clienttesting.Action) (bool, runtime.Object, error) {
		create := action.(clienttesting.CreateAction)
		claim, ok := create.GetObject().(*resourcev1.ResourceClaim)
		if !ok || claim.Name != "" || claim.GenerateName == "" {
			return false, nil, nil
		}
		claim = claim.DeepCopy()
		base := claim.GenerateName
		if len(base) > 58 {
			base = base[:58]
		}
		claim.Name = base + utilrand.String(5)
		stamp(&claim.ObjectMeta)
		claim.ResourceVersion = nextRV()
		if err := tracker.Create(resourcev1.SchemeGroupVersion.WithResource("resourceclaims"), claim, claim.Namespace); err != nil {
			return true, nil, err
		}
		return true, claim, nil
	})

	// Updates of claims as the API server makes them: refused on a stale resourceVersion,
	// and given a new one (the scheduler's caches skip an object whose version is not
	// newer than the one they hold).
	client.PrependReactor("update", "resourceclaims", func(action clienttesting.Action) (bool, runtime.Object, error) {
		update := action.(clienttesting.UpdateAction)
		claim, ok := update.GetObject().(*resourcev1.ResourceClaim)
		if !ok {
			return false, nil, nil
		}
		gvr := resourcev1.SchemeGroupVersion.WithResource("resourceclaims")
		stored, err := tracker.Get(gvr, claim.Namespace, claim.Name)
		if err != nil {
			return true, nil, err
		}
		if claim.ResourceVersion != "" && claim.ResourceVersion != stored.(*resourcev1.ResourceClaim).ResourceVersion {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), claim.Name,
				fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
		}
		claim = claim.DeepCopy()
		claim.ResourceVersion = nextRV()
		if err := tracker.Update(gvr, claim, claim.Namespace); err != nil {
			return true, nil, err
		}
		return true, claim, nil
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
	// Each class's preemptionPolicy, which Priority admission copies into its pods.
	policies := map[string]v1.PreemptionPolicy{}
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
			createNode(ctx, client, it.raw)
		case "PriorityClass":
			var pc schedulingv1.PriorityClass
			must(json.Unmarshal(it.raw, &pc))
			if pc.PreemptionPolicy == nil {
				policy := v1.PreemptLowerPriority
				pc.PreemptionPolicy = &policy
			}
			priorities[pc.Name] = pc.Value
			policies[pc.Name] = *pc.PreemptionPolicy
			stamp(&pc.ObjectMeta)
			pc.Namespace = ""
			_, err := client.SchedulingV1().PriorityClasses().Create(ctx, &pc, metav1.CreateOptions{})
			must(err)
		case "Pod":
			// A pod already bound (spec.nodeName), running.
			p := admitPod(it.raw, priorities, policies)
			if p.Spec.NodeName == "" {
				must(fmt.Errorf("cluster.yaml: pod %s has no spec.nodeName", p.Name))
			}
			p.Status.Phase = v1.PodRunning
			_, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
			must(err)
		case "StorageClass", "CSIDriver", "CSINode", "CSIStorageCapacity", "PersistentVolumeClaim", "PersistentVolume":
			createStorageObject(ctx, client, it)
		case "DeviceClass", "ResourceSlice", "ResourceClaimTemplate", "ResourceClaim", "DeviceTaintRule":
			createDRAObject(ctx, client, it)
		default:
			must(fmt.Errorf("cluster.yaml: kind %s not handled", it.kind))
		}
	}

	// The scheduler, as cmd/kube-scheduler/app.Setup builds it.
	cfg := &schedconfig.KubeSchedulerConfiguration{}
	apiVersion := configv1.SchemeGroupVersion.String()
	if *configFlag == "" {
		versioned := &configv1.KubeSchedulerConfiguration{}
		scheme.Scheme.Default(versioned)
		must(scheme.Scheme.Convert(versioned, cfg, nil))
	} else {
		data, err := os.ReadFile(*configFlag)
		must(err)
		obj, gvk, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
		must(err)
		decoded, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
		if !ok {
			must(fmt.Errorf("%s: not a KubeSchedulerConfiguration", *configFlag))
		}
		cfg = decoded
		apiVersion = gvk.GroupVersion().String()
	}
	must(schedvalidation.ValidateKubeSchedulerConfiguration(cfg))
	informerFactory := scheduler.NewInformerFactory(client, 0)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	recorderFactory := profile.NewRecorderFactory(broadcaster)
	sched, err := scheduler.New(ctx, client, informerFactory, nil, recorderFactory,
		scheduler.WithComponentConfigVersion(apiVersion),
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
	must(sched.WaitForHandlersSync(ctx))
	go sched.Run(ctx)
	go emulateProvisioner(ctx, client)
	if *driverFlag != "" {
		if *driverFlag != "ready" && *driverFlag != "fail" {
			must(fmt.Errorf("-driver-binding: %q is not ready or fail", *driverFlag))
		}
		go emulateDriverBinding(ctx, client, *driverFlag == "ready")
	}

	var _ informers.SharedInformerFactory = informerFactory
	steps := readList(filepath.Join(dir, "steps.yaml"))
	// Binding times count from the first step's creation.
	bindsMu.Lock()
	start = time.Now()
	bindsMu.Unlock()
	var order []string // "Pod ns/name" / "PodGroup ns/name"
	stepsOut, err := os.Create(filepath.Join(outDir, "steps.jsonl"))
	must(err)
	defer stepsOut.Close()
	for i, it := range steps {
		var created string
		switch it.kind {
		case "Pod":
			p := admitPod(it.raw, priorities, policies)
			_, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
			must(err)
			makeTemplateClaims(ctx, client, p)
			created = "Pod " + p.Namespace + "/" + p.Name
		case "Node":
			created = "Node " + createNode(ctx, client, it.raw)
		case "PodGroup":
			var g schedv1a2.PodGroup
			must(json.Unmarshal(it.raw, &g))
			stamp(&g.ObjectMeta)
			g.ResourceVersion = nextRV()
			_, err := client.SchedulingV1alpha2().PodGroups(g.Namespace).Create(ctx, &g, metav1.CreateOptions{})
			must(err)
			created = "PodGroup " + g.Namespace + "/" + g.Name
		default:
			must(fmt.Errorf("steps.yaml: kind %s not handled", it.kind))
		}
		order = append(order, created)
		if gap == 0 {
			continue // a burst: no state between creations
		}
		time.Sleep(gap)
		pods, groups := snapshot(ctx, client, order)
		fmt.Fprintln(stepsOut, pyjson(om("step", i, "created", created, "pods", pods, "podGroups", groups)))
	}
	time.Sleep(settle)
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
	writeClaims(ctx, client, filepath.Join(outDir, "claims.jsonl"))
}

// writeClaims writes every allocated claim's devices (sorted by claim): request, pool,
// device, whether it is a share (share IDs are random, so only their presence is kept)
// and the capacity it consumes.
func writeClaims(ctx context.Context, client *fake.Clientset, path string) {
	claims, err := client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	must(err)
	sort.Slice(claims.Items, func(a, b int) bool {
		return claims.Items[a].Namespace+"/"+claims.Items[a].Name < claims.Items[b].Namespace+"/"+claims.Items[b].Name
	})
	out, err := os.Create(path)
	must(err)
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		devices := []orderedMap{}
		for _, r := range c.Status.Allocation.Devices.Results {
			names := make([]string, 0, len(r.ConsumedCapacity))
			for name := range r.ConsumedCapacity {
				names = append(names, string(name))
			}
			sort.Strings(names)
			consumed := []any{}
			for _, name := range names {
				q := r.ConsumedCapacity[resourcev1.QualifiedName(name)]
				consumed = append(consumed, []any{name, q.String()})
			}
			device := om("request", r.Request, "pool", r.Pool, "device", r.Device,
				"shared", r.ShareID != nil, "consumed", consumed)
			if len(r.BindingConditions) > 0 {
				// Binding conditions, and what the claim's status says of the device.
				status := []orderedMap{}
				for _, d := range c.Status.Devices {
					if d.Driver == r.Driver && d.Pool == r.Pool && d.Device == r.Device {
						for _, cond := range d.Conditions {
							status = append(status, om("type", cond.Type, "status", string(cond.Status)))
						}
					}
				}
				device = device.with("bindingConditions", r.BindingConditions,
					"bindingFailureConditions", r.BindingFailureConditions, "conditions", status)
			}
			devices = append(devices, device)
		}
		bound := false
		for _, r := range c.Status.Allocation.Devices.Results {
			bound = bound || len(r.BindingConditions) > 0
		}
		if c.Annotations["resource.kubernetes.io/extended-resource-claim"] == "true" {
			// Made by the scheduler with a random name: kept by its owner, with the
			// requests it wrote and the pod's status naming them.
			owner := c.OwnerReferences[0].Name
			requests := []orderedMap{}
			for _, r := range c.Spec.Devices.Requests {
				requests = append(requests, om("name", r.Name, "class", r.Exactly.DeviceClassName, "count", r.Exactly.Count))
			}
			pod, err := client.CoreV1().Pods(c.Namespace).Get(ctx, owner, metav1.GetOptions{})
			must(err)
			mappings := []orderedMap{}
			if s := pod.Status.ExtendedResourceClaimStatus; s != nil {
				if s.ResourceClaimName != c.Name {
					must(fmt.Errorf("pod %s names claim %s, not %s", owner, s.ResourceClaimName, c.Name))
				}
				for _, m := range s.RequestMappings {
					mappings = append(mappings, om("container", m.ContainerName, "resource", m.ResourceName, "request", m.RequestName))
				}
			}
			fmt.Fprintln(out, pyjson(om("extendedResourcesOf", c.Namespace+"/"+owner, "requests", requests,
				"mappings", mappings, "devices", devices)))
			continue
		}
		line := om("claim", c.Namespace+"/"+c.Name, "devices", devices)
		if bound {
			// Where the allocation may be used (a device binding to the node keeps it
			// there), and whether it was stamped.
			nodes := []string{}
			if sel := c.Status.Allocation.NodeSelector; sel != nil {
				for _, t := range sel.NodeSelectorTerms {
					for _, f := range t.MatchFields {
						nodes = append(nodes, f.Key+" "+string(f.Operator)+" "+strings.Join(f.Values, ","))
					}
					for _, e := range t.MatchExpressions {
						nodes = append(nodes, e.Key+" "+string(e.Operator)+" "+strings.Join(e.Values, ","))
					}
				}
			}
			line = line.with("nodeSelector", nodes, "stamped", c.Status.Allocation.AllocationTimestamp != nil)
		}
		fmt.Fprintln(out, pyjson(line))
	}
	must(out.Close())
}

// emulateDriverBinding stands for a DRA driver whose devices have binding conditions:
// once a claim is allocated such a device, it sets the device's status in the claim,
// every binding condition True (ready) or the first binding failure condition True
// (fail, reason SimulatedFailure), as Gantry's simulated drivers do.
func emulateDriverBinding(ctx context.Context, client *fake.Clientset, ready bool) {
	for ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		claims, err := client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for i := range claims.Items {
			claim := claims.Items[i]
			if claim.Status.Allocation == nil || len(claim.Status.Devices) > 0 {
				continue
			}
			var statuses []resourcev1.AllocatedDeviceStatus
			for _, r := range claim.Status.Allocation.Devices.Results {
				if len(r.BindingConditions) == 0 {
					continue
				}
				now := metav1.Now()
				var conditions []metav1.Condition
				if ready {
					for _, c := range r.BindingConditions {
						conditions = append(conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: now})
					}
				} else {
					conditions = append(conditions, metav1.Condition{Type: r.BindingFailureConditions[0], Status: metav1.ConditionTrue,
						Reason: "SimulatedFailure", Message: "the simulated driver failed the binding", LastTransitionTime: now})
				}
				statuses = append(statuses, resourcev1.AllocatedDeviceStatus{Driver: r.Driver, Pool: r.Pool, Device: r.Device, Conditions: conditions})
			}
			if len(statuses) == 0 {
				continue
			}
			claim.Status.Devices = statuses
			if _, err := client.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, &claim, metav1.UpdateOptions{}); err != nil {
				continue
			}
		}
	}
}

// admitPod decodes a Pod as the API server would admit it: core/v1 defaults, Priority
// admission (the priority and preemptionPolicy of its class among those of cluster.yaml
// read so far) and DefaultTolerationSeconds.
func admitPod(raw []byte, priorities map[string]int32, policies map[string]v1.PreemptionPolicy) *v1.Pod {
	var p v1.Pod
	must(json.Unmarshal(raw, &p))
	corev1defaults.SetObjectDefaults_Pod(&p)
	stamp(&p.ObjectMeta)
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
	if classPolicy, ok := policies[p.Spec.PriorityClassName]; ok {
		policy = classPolicy
	}
	p.Spec.PreemptionPolicy = &policy
	secs := int64(300)
	p.Spec.Tolerations = append(p.Spec.Tolerations,
		v1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &secs},
		v1.Toleration{Key: "node.kubernetes.io/unreachable", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &secs})
	p.Status.Phase = v1.PodPending
	p.Status.QOSClass = v1.PodQOSBurstable
	p.ResourceVersion = nextRV()
	return &p
}

// createStorageObject creates a StorageClass, CSIDriver, CSINode, CSIStorageCapacity,
// PersistentVolumeClaim or PersistentVolume of cluster.yaml, as the API server would
// store it (claims and capacities in "default" unless they name a namespace).
func createStorageObject(ctx context.Context, client *fake.Clientset, it item) {
	var err error
	switch it.kind {
	case "StorageClass":
		var o storagev1.StorageClass
		must(json.Unmarshal(it.raw, &o))
		stamp(&o.ObjectMeta)
		o.Namespace = ""
		_, err = client.StorageV1().StorageClasses().Create(ctx, &o, metav1.CreateOptions{})
	case "CSIDriver":
		var o storagev1.CSIDriver
		must(json.Unmarshal(it.raw, &o))
		stamp(&o.ObjectMeta)
		o.Namespace = ""
		_, err = client.StorageV1().CSIDrivers().Create(ctx, &o, metav1.CreateOptions{})
	case "CSINode":
		var o storagev1.CSINode
		must(json.Unmarshal(it.raw, &o))
		stamp(&o.ObjectMeta)
		o.Namespace = ""
		_, err = client.StorageV1().CSINodes().Create(ctx, &o, metav1.CreateOptions{})
	case "CSIStorageCapacity":
		var o storagev1.CSIStorageCapacity
		must(json.Unmarshal(it.raw, &o))
		stamp(&o.ObjectMeta)
		_, err = client.StorageV1().CSIStorageCapacities(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
	case "PersistentVolumeClaim":
		var o v1.PersistentVolumeClaim
		must(json.Unmarshal(it.raw, &o))
		stamp(&o.ObjectMeta)
		_, err = client.CoreV1().PersistentVolumeClaims(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
	case "PersistentVolume":
		var o v1.PersistentVolume
		must(json.Unmarshal(it.raw, &o))
		stamp(&o.ObjectMeta)
		o.Namespace = ""
		_, err = client.CoreV1().PersistentVolumes().Create(ctx, &o, metav1.CreateOptions{})
	}
	must(err)
}

// emulateProvisioner stands in for a CSI driver's external provisioner and the PV
// controller, which the fake clientset does not run: a claim the scheduler marked with
// the selected-node annotation gets a volume of its size on that node, and is bound to
// it, and a claim whose static volume the scheduler pre-bound (the volume's claimRef) is
// bound to that volume, so that VolumeBinding's PreBind sees it fully bound and the pod
// is bound.
func emulateProvisioner(ctx context.Context, client *fake.Clientset) {
	const selectedNode = "volume.kubernetes.io/selected-node"
	for ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		bindPreboundClaims(ctx, client)
		claims, err := client.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for i := range claims.Items {
			claim := claims.Items[i]
			node, ok := claim.Annotations[selectedNode]
			if !ok || claim.Spec.VolumeName != "" {
				continue
			}
			class := ""
			if claim.Spec.StorageClassName != nil {
				class = *claim.Spec.StorageClassName
			}
			pv := &v1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: "pv-" + claim.Namespace + "-" + claim.Name},
				Spec: v1.PersistentVolumeSpec{
					Capacity:         v1.ResourceList{v1.ResourceStorage: claim.Spec.Resources.Requests[v1.ResourceStorage]},
					AccessModes:      claim.Spec.AccessModes,
					StorageClassName: class,
					ClaimRef:         &v1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
					PersistentVolumeSource: v1.PersistentVolumeSource{
						CSI: &v1.CSIPersistentVolumeSource{Driver: "emulated", VolumeHandle: claim.Name},
					},
					NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
						MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{node}}},
					}}}},
				},
				Status: v1.PersistentVolumeStatus{Phase: v1.VolumeBound},
			}
			if _, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
				continue
			}
			claim.Spec.VolumeName = pv.Name
			claim.Annotations["pv.kubernetes.io/bind-completed"] = "yes"
			claim.Status.Phase = v1.ClaimBound
			claim.ResourceVersion = nextRV()
			_, err := client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, &claim, metav1.UpdateOptions{})
			must(err)
		}
	}
}

// bindPreboundClaims is the PV controller's side of a static binding: a volume the
// scheduler pointed at a claim (claimRef) and the claim, still without a volume, are
// bound to each other.
func bindPreboundClaims(ctx context.Context, client *fake.Clientset) {
	volumes, err := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range volumes.Items {
		pv := volumes.Items[i]
		ref := pv.Spec.ClaimRef
		if ref == nil || pv.Status.Phase == v1.VolumeBound {
			continue
		}
		claim, err := client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil || claim.Spec.VolumeName != "" {
			continue
		}
		claim.Spec.VolumeName = pv.Name
		if claim.Annotations == nil {
			claim.Annotations = map[string]string{}
		}
		claim.Annotations["pv.kubernetes.io/bind-completed"] = "yes"
		claim.Status.Phase = v1.ClaimBound
		claim.ResourceVersion = nextRV()
		_, err = client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{})
		must(err)
		pv.Status.Phase = v1.VolumeBound
		pv.ResourceVersion = nextRV()
		_, err = client.CoreV1().PersistentVolumes().Update(ctx, &pv, metav1.UpdateOptions{})
		must(err)
	}
}

// createNode creates a Node as the API server would store it (core/v1 defaults, the
// hostname label the kubelet sets) and returns its name.
func createNode(ctx context.Context, client *fake.Clientset, raw []byte) string {
	var n v1.Node
	must(json.Unmarshal(raw, &n))
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
	return n.Name
}

type orderedMap struct {
	keys   []string
	values map[string]any
}

// with adds more keys and values after those the map has.
func (m orderedMap) with(kv ...any) orderedMap {
	more := om(kv...)
	for _, k := range more.keys {
		m.keys = append(m.keys, k)
		m.values[k] = more.values[k]
	}
	return m
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
			if apierrors.IsNotFound(err) {
				// Preempted: its deletion went through.
				pods = append(pods, om("pod", key, "node", nil, "reason", "deleted"))
				continue
			}
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
		case "PodGroup":
			g, err := client.SchedulingV1alpha2().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
			must(err)
			conds := []orderedMap{}
			for _, c := range g.Status.Conditions {
				conds = append(conds, om("type", c.Type, "status", string(c.Status), "reason", c.Reason, "message", c.Message))
			}
			groups = append(groups, om("podGroup", key, "conditions", conds))
		}
	}
	return pods, groups
}

// createDRAObject creates a DeviceClass, ResourceSlice, ResourceClaimTemplate or
// ResourceClaim (resource.k8s.io/v1), or a DeviceTaintRule (v1beta2), of cluster.yaml as
// the API server would store it.
func createDRAObject(ctx context.Context, client *fake.Clientset, it item) {
	var err error
	switch it.kind {
	case "DeviceClass":
		var o resourcev1.DeviceClass
		must(json.Unmarshal(it.raw, &o))
		stamp(&o.ObjectMeta)
		o.Namespace = ""
		o.ResourceVersion = nextRV()
		_, err = client.ResourceV1().DeviceClasses().Create(ctx, &o, metav1.CreateOptions{})
	case "ResourceSlice":
		var o resourcev1.ResourceSlice
		must(json.Unmarshal(it.raw, &o))
		stamp(&o.ObjectMeta)
		o.Namespace = ""
		o.ResourceVersion = nextRV()
		_, err = client.ResourceV1().ResourceSlices().Create(ctx, &o, metav1.CreateOptions{})
	case "ResourceClaimTemplate":
		var o resourcev1.ResourceClaimTemplate
		must(json.Unmarshal(it.raw, &o))
		defaultClaimSpec(&o.Spec.Spec)
		stamp(&o.ObjectMeta)
		o.ResourceVersion = nextRV()
		_, err = client.ResourceV1().ResourceClaimTemplates(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
	case "ResourceClaim":
		var o resourcev1.ResourceClaim
		must(json.Unmarshal(it.raw, &o))
		defaultClaimSpec(&o.Spec)
		stamp(&o.ObjectMeta)
		o.ResourceVersion = nextRV()
		_, err = client.ResourceV1().ResourceClaims(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
	case "DeviceTaintRule":
		// resource.k8s.io/v1beta2, read by the scheduler's slice tracker with
		// DRADeviceTaintRules on.
		var o resourcev1beta2.DeviceTaintRule
		must(json.Unmarshal(it.raw, &o))
		stamp(&o.ObjectMeta)
		o.Namespace = ""
		o.ResourceVersion = nextRV()
		_, err = client.ResourceV1beta2().DeviceTaintRules().Create(ctx, &o, metav1.CreateOptions{})
	}
	must(err)
}

// makeTemplateClaims stands in for the resourceclaim controller, which the fake clientset
// does not run: for each of the pod's claims from a template, a claim `<pod>-<claim>` made
// from the template's spec, owned by the pod and annotated with the pod's claim name, and
// the pod's status.resourceClaimStatuses naming it.
func makeTemplateClaims(ctx context.Context, client *fake.Clientset, pod *v1.Pod) {
	var statuses []v1.PodResourceClaimStatus
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimTemplateName == nil {
			continue
		}
		template, err := client.ResourceV1().ResourceClaimTemplates(pod.Namespace).Get(ctx, *pc.ResourceClaimTemplateName, metav1.GetOptions{})
		must(err)
		isController := true
		claim := &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name:        pod.Name + "-" + pc.Name,
				Namespace:   pod.Namespace,
				Annotations: map[string]string{"resource.kubernetes.io/pod-claim-name": pc.Name},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
					Controller: &isController, BlockOwnerDeletion: &isController,
				}},
			},
			Spec: template.Spec.Spec,
		}
		stamp(&claim.ObjectMeta)
		claim.ResourceVersion = nextRV()
		_, err = client.ResourceV1().ResourceClaims(pod.Namespace).Create(ctx, claim, metav1.CreateOptions{})
		must(err)
		name := claim.Name
		statuses = append(statuses, v1.PodResourceClaimStatus{Name: pc.Name, ResourceClaimName: &name})
	}
	if len(statuses) == 0 {
		return
	}
	stored, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	must(err)
	stored.Status.ResourceClaimStatuses = statuses
	stored.ResourceVersion = nextRV()
	_, err = client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, stored, metav1.UpdateOptions{})
	must(err)
}

// defaultClaimSpec is the API server's defaulting of a claim's requests
// (pkg/apis/resource/v1/defaults.go, v1.36, not vendored in kueue): an unset allocation
// mode is ExactCount, and ExactCount without a count is one device.
func defaultClaimSpec(spec *resourcev1.ResourceClaimSpec) {
	exact := func(mode *resourcev1.DeviceAllocationMode, count *int64) {
		if *mode == "" {
			*mode = resourcev1.DeviceAllocationModeExactCount
		}
		if *mode == resourcev1.DeviceAllocationModeExactCount && *count == 0 {
			*count = 1
		}
	}
	for i := range spec.Devices.Requests {
		r := &spec.Devices.Requests[i]
		if r.Exactly != nil {
			exact(&r.Exactly.AllocationMode, &r.Exactly.Count)
		}
		for j := range r.FirstAvailable {
			exact(&r.FirstAvailable[j].AllocationMode, &r.FirstAvailable[j].Count)
		}
	}
}
