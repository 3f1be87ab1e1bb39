package stack

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/kube-reclaim/kube-reclaim/deploy"
)

// PluginOverlay is the deploy/ overlay of the plugin topology.
const PluginOverlay = "plugin-scheduler"

// The ConfigMap that holds the scheduler's configuration, and its key.
const (
	schedulerConfigMap = "kube-reclaim-scheduler-config"
	schedulerConfigKey = "kube-scheduler-config.yaml"
)

// PluginSchedulerProfile returns the one profile of the
// KubeSchedulerConfiguration that deploy/plugin-scheduler gives
// kube-reclaim-scheduler (its ConfigMap, as the overlay renders it), so that
// a benchmark schedules on what is deployed. The configuration must have no
// extender: the plugin places in its stead.
func PluginSchedulerProfile() (configv1.KubeSchedulerProfile, error) {
	objs, err := deploy.Objects(PluginOverlay)
	if err != nil {
		return configv1.KubeSchedulerProfile{}, err
	}
	for _, u := range objs {
		// configMapGenerator suffixes the name with a hash of the data.
		if u.GetKind() != "ConfigMap" || !strings.HasPrefix(u.GetName(), schedulerConfigMap+"-") {
			continue
		}
		var cm corev1.ConfigMap
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cm); err != nil {
			return configv1.KubeSchedulerProfile{}, err
		}
		var cfg configv1.KubeSchedulerConfiguration
		if err := yaml.UnmarshalStrict([]byte(cm.Data[schedulerConfigKey]), &cfg); err != nil {
			return configv1.KubeSchedulerProfile{}, fmt.Errorf("deploy/%s: %s: %w", PluginOverlay, schedulerConfigKey, err)
		}
		if len(cfg.Profiles) != 1 || len(cfg.Extenders) != 0 {
			return configv1.KubeSchedulerProfile{}, fmt.Errorf("deploy/%s: %d profiles and %d extenders; want one profile and no extender", PluginOverlay, len(cfg.Profiles), len(cfg.Extenders))
		}
		return cfg.Profiles[0], nil
	}
	return configv1.KubeSchedulerProfile{}, fmt.Errorf("deploy/%s has no %s ConfigMap", PluginOverlay, schedulerConfigMap)
}
