// Package kubernetes holds no code: it is the test of the Kubernetes
// manifests beside it, in a module of its own so that the gateway's module
// does not depend on the Kubernetes API packages the test decodes them
// with.
package kubernetes
