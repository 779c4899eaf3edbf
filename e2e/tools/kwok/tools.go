//go:build tools

// Package tools pins kwok, which runs fake nodes and takes pods through their
// lifecycle, so that Jobs complete without a container runtime.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
