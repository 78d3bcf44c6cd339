# Podman for the container runtime's tests (pkg/runner/container/podmantest
# starts its API service on a socket of its own and builds a busybox image
# from /bin/busybox: no registry). Installed here when missing and we are
# root on Debian, as ../shared/TOOLCHAIN.md §6 says: podman, runc (crun fails
# on hybrid cgroups) and busybox-static.
.PHONY: podman
podman: ## install podman, runc and busybox-static when missing (Debian, as root)
	@if command -v podman >/dev/null && command -v runc >/dev/null && [ -x /bin/busybox ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc busybox-static; \
	else \
	  echo "podman: the container runtime's tests need podman, runc and /bin/busybox; install them (Debian: sudo apt-get install podman runc busybox-static) or run make podman as root" >&2; exit 1; \
	fi
