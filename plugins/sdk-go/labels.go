// The recommended labels of a parent's children, and selectors of one component's pods only.

package operatorhost

// AppLabels is `app.kubernetes.io/name: app` and `app.kubernetes.io/instance: instance` (the
// parent's name): labels every child of one parent can carry, and a selector of that parent's
// pods when it has one kind of pod.
func AppLabels(app, instance string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":     app,
		"app.kubernetes.io/instance": instance,
	}
}

// ComponentLabels is AppLabels and `app.kubernetes.io/component: component`. Give each kind
// of pod of a parent (the server's, a migration Job's, ...) a component of its own, and a
// Service's or a PodDisruptionBudget's selector made of these labels matches that component's
// pods only, never another child's (`render` and `conformance` warn when two children's
// selectors do).
func ComponentLabels(app, instance, component string) map[string]string {
	labels := AppLabels(app, instance)
	labels["app.kubernetes.io/component"] = component
	return labels
}
