package meshlab

import (
	"errors"
	"testing"
)

// FuzzParseFile: any bytes give resources or a *FileError, never a panic.
func FuzzParseFile(f *testing.F) {
	for _, s := range []string{goodClusters, goodListener, goodNames, "kind: NameTable\ntable: {a: {ips: [x]}}\n", "---\n---\n", "{}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := ParseFile("f.yaml", data)
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FileError", err)
			}
			return
		}
		for _, r := range res {
			if r.Msg == nil || r.TypeURL == "" {
				t.Fatalf("resource without message or type: %+v", r)
			}
		}
	})
}
