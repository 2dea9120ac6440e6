//go:build tools

// Package tools pins the Kubernetes control-plane binaries that the
// API-server tests build: kube-apiserver and kube-controller-manager from
// k8s.io/kubernetes, with every staging module at its published version.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
