// Package webui serves Runway's web UI: the single-page application built
// from ui/ (TypeScript, React, Vite) into dist/ and embedded in the binary.
//
// The bundle is committed (like gen/ for proto/) so that `make run` needs
// nothing but Go; `make check` rebuilds it with the pinned npm toolchain and
// fails when dist/ differs (scripts/check-ui.sh).
//
// The UI talks only to the public REST API on the same origin, so the
// handler is mounted beside the gateway: grpcserver sends /v1/... to the
// gateway and any other GET it does not own (/openapi.json, /healthz,
// /metrics) here. A path naming a file in dist/ gets that file; any other
// path is a client route and gets index.html.
//
// Headers: a strict Content-Security-Policy (scripts, styles and fetches
// from this origin only; no inline script, no framing), nosniff, no
// referrer. Vite puts a content hash in every name under assets/, so those
// are cached for a year; index.html is revalidated on every load so a new
// binary's UI is picked up at once.
package webui
