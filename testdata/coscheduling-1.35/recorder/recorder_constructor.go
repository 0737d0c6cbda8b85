package coscheduling

// Added for Gantry's Coscheduling recorder (not part of scheduler-plugins): New, with the
// PodGroup reader given rather than built from handle.KubeConfig(), which a scheduler run
// against client-go's fake clientset does not have. Everything else is New's code.

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/scheduler-plugins/apis/config"
	"sigs.k8s.io/scheduler-plugins/apis/config/validation"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling/core"
)

// NewWithReader is New reading PodGroups through c.
func NewWithReader(ctx context.Context, obj runtime.Object, handle fwk.Handle, c client.Client) (fwk.Plugin, error) {
	lh := klog.FromContext(ctx).WithValues("plugin", Name)
	args, ok := obj.(*config.CoschedulingArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type CoschedulingArgs, got %T", obj)
	}
	if err := validation.ValidateCoschedulingArgs(args, nil); err != nil {
		return nil, err
	}
	handle.SharedInformerFactory().Core().V1().Pods().Informer().AddIndexers(cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	scheduleTimeDuration := time.Duration(args.PermitWaitingTimeSeconds) * time.Second
	pgMgr := core.NewPodGroupManager(c, handle.SnapshotSharedLister(), &scheduleTimeDuration,
		handle.SharedInformerFactory().Core().V1().Pods())
	plugin := &Coscheduling{
		logger:            lh,
		frameworkHandler:  handle,
		pgMgr:             pgMgr,
		scheduleTimeout:   &scheduleTimeDuration,
		pgRejectThreshold: float64(args.PodGroupRejectPercentage) / 100.0,
	}
	if args.PodGroupBackoffSeconds < 0 {
		return nil, fmt.Errorf("parse arguments failed")
	} else if args.PodGroupBackoffSeconds > 0 {
		pgBackoff := time.Duration(args.PodGroupBackoffSeconds) * time.Second
		plugin.pgBackoff = &pgBackoff
	}
	return plugin, nil
}
