// Package limitedread reads files whose size is not to be trusted: a
// manifest or a config file may be a multi-gigabyte file, a growing one, or
// /dev/zero, and must cost no more than its limit to refuse.
//
// It stands under pkg/, beside the library that reads manifests with it
// (pkg/manifest), rather than in the operator's internal/: a library
// package imports nothing of the operator, and the operator's config
// loading shares it from here.
package limitedread

import (
	"fmt"
	"io"
	"os"
)

// TooLargeError is a file that holds more than the limit.
type TooLargeError struct {
	Path  string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than the %d-byte limit", e.Path, e.Limit)
}

// File reads at most limit bytes of path, and fails with a *TooLargeError
// when there is more.
func File(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Path: path, Limit: limit}
	}
	return data, nil
}
