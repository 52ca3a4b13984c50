// Package kubeclient is evictd's client of the API server: client-go's REST
// client, generic typed clients and event sink over a scheme of only the
// API groups evictd uses (core/v1, policy/v1, coordination.k8s.io/v1, and
// authentication.k8s.io/v1 and authorization.k8s.io/v1 for the reviews of
// its scrapers), instead of client-go's
// clientset, whose scheme registers every built-in group and keeps their
// code and registrations in the agent's memory.
package kubeclient
