// Logging outside a component (a plugin's own `go test`): to standard error.

//go:build !wasip1

package operatorhost

import (
	"fmt"
	"os"
)

var levelNames = [...]string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR"}

func logAt(level logLevel, message string) {
	fmt.Fprintf(os.Stderr, "%s %s\n", levelNames[level], message)
}
