package apierr_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	"github.com/runwayhq/runway/pkg/apierr"
)

// documented is what error_reason.proto says about one reason.
type documented struct {
	code codes.Code
	keys []string
}

var (
	valueLine   = regexp.MustCompile(`^\s*([A-Z_]+) = \d+;`)
	codeRef     = regexp.MustCompile(`Code ([A-Z_]+)`)
	metadataRef = regexp.MustCompile(`Metadata:([^.]*)`)
	quoted      = regexp.MustCompile(`"([A-Za-z]+)"`)
)

// readProto parses the comment above each ErrorReason value: its "Code X" and
// the quoted keys after "Metadata:".
func readProto(t *testing.T) map[string]documented {
	t.Helper()
	src, err := os.ReadFile("../../proto/runway/common/v1/error_reason.proto")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]documented{}
	var comment []string
	for line := range strings.Lines(string(src)) {
		trimmed := strings.TrimSpace(line)
		if text, ok := strings.CutPrefix(trimmed, "//"); ok {
			comment = append(comment, strings.TrimSpace(text))
			continue
		}
		if m := valueLine.FindStringSubmatch(line); m != nil {
			text := strings.Join(comment, " ")
			var d documented
			if c := codeRef.FindStringSubmatch(text); c != nil {
				if err := d.code.UnmarshalJSON([]byte(`"` + c[1] + `"`)); err != nil {
					t.Fatalf("%s: code %s: %v", m[1], c[1], err)
				}
			}
			if md := metadataRef.FindStringSubmatch(text); md != nil {
				for _, k := range quoted.FindAllStringSubmatch(md[1], -1) {
					d.keys = append(d.keys, k[1])
				}
			}
			docs[m[1]] = d
		}
		comment = nil
	}
	return docs
}

// extraKeys are metadata keys apierr sends beyond the proto comment, each
// with its reason. Adding a key is compatible; the proto comment should
// catch up when it is next edited.
var extraKeys = map[commonv1.ErrorReason][]string{
	// The message quotes the bad field paths (the CLI prints only the
	// message), so the metadata must hold them too.
	commonv1.ErrorReason_INVALID_FIELD: {"field"},
}

func TestTable_matchesProto(t *testing.T) {
	docs := readProto(t)
	if len(docs) != len(commonv1.ErrorReason_name) {
		t.Fatalf("parsed %d reasons from the proto, the enum has %d", len(docs), len(commonv1.ErrorReason_name))
	}
	for name, d := range docs {
		reason := commonv1.ErrorReason(commonv1.ErrorReason_value[name])
		if reason == commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED {
			continue
		}
		t.Run(name, func(t *testing.T) {
			if got := apierr.CodeOf(reason); got != d.code {
				t.Errorf("code = %v, the proto says %v", got, d.code)
			}
			wantKeys := append(slices.Clone(d.keys), extraKeys[reason]...)
			slices.Sort(wantKeys)
			gotKeys := apierr.MetadataKeys(reason)
			slices.Sort(gotKeys)
			if !slices.Equal(gotKeys, wantKeys) {
				t.Errorf("metadata keys = %v, the proto says %v", gotKeys, wantKeys)
			}
		})
	}
}
