// operator-host plugin for Memcached, in Go: one Deployment and one Service per Memcached CR.
package main

import (
	"fmt"
	"sort"
	"strings"
	"unicode"

	oh "operator-host.dev/sdk"
)

const (
	// maxSize is the largest spec.size accepted (the CRD schema says the same).
	maxSize = 100
	// defaultImage is used when spec.image is not set.
	defaultImage = "memcached:1.6.39-alpine"
	// defaultPort is used when spec.containerPort is not set.
	defaultPort = 11211
)

// MemcachedSpec is the desired state of a Memcached cache.
type MemcachedSpec struct {
	Size          int                      `json:"size" oh:"minimum=0,maximum=100" description:"Number of Memcached pods."`
	Image         string                   `json:"image" default:"memcached:1.6.39-alpine" description:"Container image."`
	ContainerPort int                      `json:"containerPort" default:"11211" oh:"minimum=1,maximum=65535" description:"Port Memcached listens on, and the Service's port."`
	Resources     *oh.ResourceRequirements `json:"resources,omitempty" description:"Compute resources of the Memcached container."`
}

// MemcachedStatus is the observed state of a Memcached cache.
type MemcachedStatus struct {
	ReadyReplicas int           `json:"readyReplicas" default:"0" description:"Pods of the Deployment that are ready."`
	Selector      string        `json:"selector" default:"\"\"" description:"The label selector of the pods, as a string."`
	Conditions    oh.Conditions "json:\"conditions\" default:\"[]\" description:\"`Available`: whether the Deployment has rolled out the current spec (image, port, resources, size) and its `size` pods are ready.\""
}

// Plugin is the Memcached operator.
var Plugin = &oh.Plugin[MemcachedSpec, MemcachedStatus]{
	Name:    "memcached",
	Version: "0.1.0",
	Parent: oh.ParentKind{
		Group:      "cache.example.com",
		Version:    "v1alpha1",
		Kind:       "Memcached",
		Plural:     "memcacheds",
		ShortNames: []string{"mc"},
		PrinterColumns: []oh.PrinterColumn{
			{Name: "Size", Type: "integer", JSONPath: ".spec.size"},
			{Name: "Ready", Type: "integer", JSONPath: ".status.readyReplicas"},
			{Name: "Available", Type: "string", JSONPath: `.status.conditions[?(@.type=="Available")].status`},
			{Name: "Image", Type: "string", JSONPath: ".spec.image", Priority: 1},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		},
	},
	Children:  []oh.Kind{oh.KindDeployment, oh.KindService},
	Reconcile: reconcile,
	Validate:  admit,
	Default:   pinImage,
}

func init() { oh.Register(Plugin) }

// main is not called in a component (its package initialisers are); `go build` needs it.
func main() {}

func reconcile(parent *oh.Parent[MemcachedSpec, MemcachedStatus], observed *oh.Observed) (*oh.Desired, error) {
	spec, err := validate(parent.Spec)
	if err != nil {
		return nil, err
	}
	name := parent.Metadata.Name
	labels := selectorLabels(name)
	desired := &oh.Desired{}
	desired.Child(oh.KindDeployment, deployment(name, spec, labels))
	desired.Child(oh.KindService, service(name, spec, labels))
	observedDeployment, err := observed.Workload(oh.KindDeployment, name)
	if err != nil {
		return nil, err
	}
	desired.SetStatus(status(parent, observedDeployment, desired, labels))
	return desired, nil
}

// admit refuses at `kubectl apply` what reconcile would report as an invalid spec, and warns
// about a cache without pods.
func admit(parent, _ *oh.Parent[MemcachedSpec, MemcachedStatus]) *oh.Validation {
	validation := oh.NewValidation()
	_, err := validate(parent.Spec)
	validation.Check(err)
	if parent.Spec.Size == 0 {
		validation.Warn(fmt.Sprintf("Memcached %s: spec.size is 0, so no Memcached pod runs", parent.Metadata.NameAny()))
	}
	return validation
}

// pinImage gives an image without a tag or digest the tag this plugin is tested with, so a
// cache never runs whatever `latest` is that day.
func pinImage(parent *oh.Parent[MemcachedSpec, MemcachedStatus]) {
	if pinned, ok := pinnedImage(parent.Spec.Image); ok {
		parent.Spec.Image = pinned
	}
}

// pinnedImage is image with defaultImage's tag when it names the `memcached` repository
// without a tag or digest (`memcached`, `mirror.example.com/library/memcached`).
func pinnedImage(image string) (string, bool) {
	last := image[strings.LastIndex(image, "/")+1:]
	_, tag, _ := strings.Cut(defaultImage, ":")
	if last != "memcached" || strings.Contains(image, "@") {
		return "", false
	}
	return image + ":" + tag, true
}

// validate checks what the CRD schema cannot express, and what `render` sees without an API
// server; it returns the spec the children are made from, with resources as the API server
// stores them (so the applied Deployment is the one observed).
func validate(spec MemcachedSpec) (MemcachedSpec, error) {
	if spec.Size < 0 || spec.Size > maxSize {
		return spec, oh.InvalidField("size", fmt.Sprintf("must be between 0 and %d, got %d", maxSize, spec.Size))
	}
	if spec.ContainerPort < 1 || spec.ContainerPort > 65535 {
		return spec, oh.InvalidField("containerPort", fmt.Sprintf("must be between 1 and 65535, got %d", spec.ContainerPort))
	}
	if strings.TrimSpace(spec.Image) == "" || strings.IndexFunc(spec.Image, unicode.IsSpace) >= 0 {
		return spec, oh.InvalidField("image", "must be a container image reference, got "+oh.DebugString(spec.Image))
	}
	if spec.Resources != nil {
		resources, err := oh.ValidateContainerResources("resources", *spec.Resources)
		if err != nil {
			return spec, err
		}
		canonical := oh.ResourceRequirements(resources)
		spec.Resources = &canonical
	}
	return spec, nil
}

// selectorLabels select exactly one CR's pods: two CRs in a namespace never share them.
func selectorLabels(name string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": name}
}

func childLabels(selector map[string]string) map[string]string {
	labels := map[string]string{"app.kubernetes.io/component": "cache"}
	for key, value := range selector {
		labels[key] = value
	}
	return labels
}

func deployment(name string, spec MemcachedSpec, selector map[string]string) map[string]any {
	probe := map[string]any{"tcpSocket": map[string]any{"port": "memcached"}, "periodSeconds": 10}
	container := map[string]any{
		"name":            "memcached",
		"image":           spec.Image,
		"args":            []any{"-m=64", "-o", "modern", fmt.Sprintf("-p=%d", spec.ContainerPort)},
		"ports":           []any{map[string]any{"name": "memcached", "containerPort": spec.ContainerPort, "protocol": "TCP"}},
		"readinessProbe":  probe,
		"livenessProbe":   probe,
		"securityContext": oh.RestrictedContainerSecurityContext(),
	}
	if spec.Resources != nil {
		container["resources"] = *spec.Resources
	}
	return map[string]any{
		"metadata": oh.ChildMeta(name, childLabels(selector)),
		"spec": map[string]any{
			"replicas": spec.Size,
			"selector": map[string]any{"matchLabels": selector},
			"template": map[string]any{
				"metadata": map[string]any{"labels": childLabels(selector)},
				"spec": map[string]any{
					"containers": []any{container},
					// The image runs as its own non-root user (memcache).
					"securityContext": oh.RestrictedPodSecurityContext(),
				},
			},
		},
	}
}

func service(name string, spec MemcachedSpec, selector map[string]string) map[string]any {
	return map[string]any{
		"metadata": oh.ChildMeta(name, childLabels(selector)),
		"spec": map[string]any{
			"selector": selector,
			"ports": []any{map[string]any{
				"name":       "memcached",
				"port":       spec.ContainerPort,
				"targetPort": "memcached",
				"protocol":   "TCP",
			}},
		},
	}
}

// status is made from the observed Deployment: nothing is assumed that was not observed.
//
// Available is true only once the Deployment carries the spec in desired and has rolled it
// out by `kubectl rollout status`'s rules: the Deployment observed here is the one before this
// answer is applied, so after an image change it is the old one.
func status(parent *oh.Parent[MemcachedSpec, MemcachedStatus], observed *oh.WorkloadView, desired *oh.Desired, selector map[string]string) MemcachedStatus {
	generation := parent.Metadata.Generation
	size := parent.Spec.Size
	ready := 0
	if observed != nil && observed.Status.ReadyReplicas != nil {
		ready = int(*observed.Status.ReadyReplicas)
	}
	var available oh.Condition
	switch {
	case observed == nil:
		available = oh.NewCondition("Available", false, "DeploymentNotFound", "the Deployment has not been observed yet", generation)
	case observed.Spec.Replicas == nil || int(*observed.Spec.Replicas) != size:
		available = oh.NewCondition("Available", false, "Scaling", fmt.Sprintf("the Deployment is being scaled to %d replicas", size), generation)
	default:
		rollout := observed.RolloutOf(desired)
		message, reason := fmt.Sprintf("%d of %d pods are ready", ready, size), "MinimumReplicasReady"
		if !rollout.IsComplete() {
			message = fmt.Sprintf("%d of %d pods are ready; rollout: %s", ready, size, rollout.Message())
			reason = rollout.Reason()
		}
		available = oh.NewCondition("Available", rollout.IsComplete(), reason, message, generation)
	}
	keys := make([]string, 0, len(selector))
	for key := range selector {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, key := range keys {
		pairs[i] = key + "=" + selector[key]
	}
	return MemcachedStatus{
		ReadyReplicas: ready,
		Selector:      strings.Join(pairs, ","),
		Conditions:    oh.Conditions{available},
	}
}
