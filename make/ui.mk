# The web UI (ui/ → pkg/webui/dist, embedded in bin/runway). The built bundle
# is committed so that `make build` and `make run` need only Go; `make check`
# rebuilds it and fails when it differs (scripts/check-ui.sh). These targets
# need Node.js and npm (Debian's nodejs/npm work); npm ci installs the exact
# versions of ui/package-lock.json.
UI_DEPS   := ui/node_modules/.package-lock.json
CHROMIUM  ?= /usr/bin/chromium

$(UI_DEPS): ui/package.json ui/package-lock.json
	@command -v npm >/dev/null || { echo "ui: npm is missing; install Node.js 20+ and npm (Debian: apt-get install nodejs npm)" >&2; exit 1; }
	cd ui && npm ci --no-audit --no-fund
	@touch $@

.PHONY: ui
ui: $(UI_DEPS) ## build the web UI into pkg/webui/dist (commit the result)
	cd ui && npm run build

.PHONY: check-ui
check-ui: $(UI_DEPS) ## the committed pkg/webui/dist is what a fresh make ui builds
	./scripts/check-ui.sh

# Debian's Chromium: installed here when missing and we are root on Debian.
.PHONY: ui-browser
ui-browser:
	@if [ -x "$(CHROMIUM)" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	else \
	  echo "test-ui: no Chromium at $(CHROMIUM); install it (Debian: sudo apt-get install chromium) or set CHROMIUM=/path/to/chromium" >&2; exit 1; \
	fi

.PHONY: test-ui
test-ui: build $(UI_DEPS) ui-browser ## UI unit tests (Vitest), then end to end in Chromium against bin/runway dev
	cd ui && npx vitest run
	cd ui && CHROMIUM=$(CHROMIUM) npx vitest run --config vitest.e2e.config.ts
