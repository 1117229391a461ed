// The errors a plugin returns: an invalid spec (not retried until the parent changes) or a
// transient failure (retried with backoff).

package operatorhost

import "fmt"

// InvalidSpec says the parent's spec is invalid; its message names the field and what was
// expected. The host does not retry until the parent changes.
type InvalidSpec struct{ Message string }

func (e *InvalidSpec) Error() string { return e.Message }

// Retry is a transient problem (an observed child that does not decode, say); the host
// retries with backoff.
type Retry struct{ Message string }

func (e *Retry) Error() string { return e.Message }

// InvalidField is an InvalidSpec for field of the parent's spec ("size" names spec.size).
func InvalidField(field, expected string) *InvalidSpec {
	return InvalidAt("spec."+field, expected)
}

// InvalidAt is an InvalidSpec for the field at path from the parent's top ("metadata.name").
func InvalidAt(path, expected string) *InvalidSpec {
	return &InvalidSpec{Message: fmt.Sprintf("%s: %s", path, expected)}
}
