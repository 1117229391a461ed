// The recommended labels of a parent's children, and selectors of one component's pods only.

/**
 * `app.kubernetes.io/name: app` and `app.kubernetes.io/instance: instance` (the parent's name):
 * labels every child of one parent can carry, and a selector of that parent's pods when it has
 * one kind of pod. Keys in sorted order, as the Rust SDK writes them.
 * @param {string} app
 * @param {string} instance
 * @returns {Record<string, string>}
 */
export function appLabels(app, instance) {
  return { 'app.kubernetes.io/instance': instance, 'app.kubernetes.io/name': app };
}

/**
 * `appLabels` and `app.kubernetes.io/component: component`. Give each kind of pod of a parent
 * (the server's, a migration Job's, ...) a component of its own, and a Service's or a
 * PodDisruptionBudget's selector made of these labels matches that component's pods only, never
 * another child's (`render` and `conformance` warn when two children's selectors do).
 * @param {string} app
 * @param {string} instance
 * @param {string} component
 * @returns {Record<string, string>}
 */
export function componentLabels(app, instance, component) {
  return { 'app.kubernetes.io/component': component, ...appLabels(app, instance) };
}
