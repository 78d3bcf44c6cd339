module github.com/runwayhq/runway/ui

// This go.mod only fences ui/ (and node_modules, where npm packages may ship
// .go files) off the root module: ./... never descends here.
go 1.26.0
