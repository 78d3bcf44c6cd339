package webui

import (
	"bytes"
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed all:dist
var dist embed.FS

// ContentSecurityPolicy is sent with every UI response. React sets style
// properties through the CSSOM, which style-src does not govern, so no
// 'unsafe-inline' is needed anywhere.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; font-src 'self'; connect-src 'self'; manifest-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Handler serves the embedded bundle. It answers GET and HEAD only.
func Handler() http.Handler {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic("webui: embedded dist missing: " + err.Error()) // a build defect, not input
	}
	return newHandler(sub)
}

func newHandler(files fs.FS) http.Handler {
	index, _ := fs.ReadFile(files, "index.html")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if name != "" && name != "index.html" {
			if b, err := fs.ReadFile(files, name); err == nil {
				serve(w, r, name, b, "public, max-age=31536000, immutable")
				return
			}
			if strings.HasPrefix(name, "assets/") {
				// A hashed asset that is not here is an old page asking a
				// new binary: a 404 says so, index.html would be parsed as JS.
				http.NotFound(w, r)
				return
			}
		}
		if index == nil {
			http.Error(w, "the web UI was not built into this binary (make ui)", http.StatusNotFound)
			return
		}
		serve(w, r, "index.html", index, "no-cache")
	})
}

func serve(w http.ResponseWriter, r *http.Request, name string, b []byte, cache string) {
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", cache)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}
