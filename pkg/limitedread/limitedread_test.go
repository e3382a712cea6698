package limitedread

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if data, err := File(path, 5); err != nil || string(data) != "12345" {
		t.Errorf("File(5) = %q, %v", data, err)
	}
	var tooLarge *TooLargeError
	if _, err := File(path, 4); !errors.As(err, &tooLarge) || tooLarge.Limit != 4 {
		t.Errorf("File(4) error = %v, want a TooLargeError", err)
	}
	// An endless file costs no more than its limit.
	if _, err := File("/dev/zero", 1<<10); !errors.As(err, &tooLarge) {
		t.Errorf("File(/dev/zero) error = %v, want a TooLargeError", err)
	}
}
