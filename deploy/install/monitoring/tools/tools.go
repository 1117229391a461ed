//go:build tools

// Package tools pins promtool, which build.sh builds from this module's Prometheus version.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
