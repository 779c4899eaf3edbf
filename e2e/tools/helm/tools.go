//go:build tools

// Package tools pins helm, used to lint, render and install Punctual's chart.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
