// Logging through the host: a plugin's lines appear in the host's log, tagged with the plugin
// and the parent being reconciled.

package operatorhost

// logLevel is the contract's log-level enum, in its order.
type logLevel uint32

const (
	levelTrace logLevel = iota
	levelDebug
	levelInfo
	levelWarn
	levelError
)

// Trace logs message at trace level.
func Trace(message string) { logAt(levelTrace, message) }

// Debug logs message at debug level.
func Debug(message string) { logAt(levelDebug, message) }

// Info logs message at info level.
func Info(message string) { logAt(levelInfo, message) }

// Warn logs message at warn level.
func Warn(message string) { logAt(levelWarn, message) }

// Error logs message at error level.
func Error(message string) { logAt(levelError, message) }
