//go:build tools

// Package tools pins kube-score, the manifest linter run on every rendering of the chart.
package tools

import _ "github.com/zegl/kube-score/cmd/kube-score"
