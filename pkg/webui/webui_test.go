package webui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

func TestHandler(t *testing.T) {
	h := newHandler(fstest.MapFS{
		"index.html":          {Data: []byte("<!doctype html><div id=root></div>")},
		"assets/app-1a2b.js":  {Data: []byte("console.log(1)")},
		"assets/app-1a2b.css": {Data: []byte("body{}")},
		"favicon.svg":         {Data: []byte("<svg/>")},
	})
	for _, tc := range []struct {
		method, path           string
		code                   int
		ctype, cache, bodyPart string
	}{
		{"GET", "/", 200, "text/html; charset=utf-8", "no-cache", "id=root"},
		{"GET", "/workloads/team-a/a1", 200, "text/html; charset=utf-8", "no-cache", "id=root"},
		{"GET", "/index.html", 200, "text/html; charset=utf-8", "no-cache", "id=root"},
		{"GET", "/assets/app-1a2b.js", 200, "text/javascript; charset=utf-8", "public, max-age=31536000, immutable", "console.log"},
		{"GET", "/assets/app-1a2b.css", 200, "text/css; charset=utf-8", "public, max-age=31536000, immutable", "body{}"},
		{"GET", "/favicon.svg", 200, "image/svg+xml", "public, max-age=31536000, immutable", "<svg/>"},
		{"GET", "/assets/gone-0000.js", 404, "", "", ""},
		{"GET", "/../../etc/passwd", 200, "text/html; charset=utf-8", "no-cache", "id=root"},
		{"POST", "/", 405, "", "", ""},
	} {
		req := httptest.NewRequest(tc.method, "http://x"+tc.path, nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		res := rec.Result()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != tc.code {
			t.Errorf("%s %s: HTTP %d, want %d", tc.method, tc.path, res.StatusCode, tc.code)
			continue
		}
		if got := res.Header.Get("Content-Security-Policy"); got != ContentSecurityPolicy {
			t.Errorf("%s %s: CSP %q", tc.method, tc.path, got)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: no nosniff", tc.method, tc.path)
		}
		if tc.code != 200 {
			continue
		}
		if got := res.Header.Get("Content-Type"); got != tc.ctype {
			t.Errorf("%s %s: Content-Type %q, want %q", tc.method, tc.path, got, tc.ctype)
		}
		if got := res.Header.Get("Cache-Control"); got != tc.cache {
			t.Errorf("%s %s: Cache-Control %q, want %q", tc.method, tc.path, got, tc.cache)
		}
		if !strings.Contains(string(body), tc.bodyPart) {
			t.Errorf("%s %s: body %q", tc.method, tc.path, body)
		}
	}
}

// The policy allows nothing inline and nothing from another origin.
func TestContentSecurityPolicy_strict(t *testing.T) {
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "*", "http:", "https:"} {
		if strings.Contains(ContentSecurityPolicy, bad) {
			t.Errorf("CSP allows %q: %s", bad, ContentSecurityPolicy)
		}
	}
}

// The embedded bundle has its index.html (make ui was run before go build).
func TestHandler_embedded(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://x/", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "<") {
		t.Errorf("embedded index: HTTP %d %q", rec.Code, rec.Body.String())
	}
}
