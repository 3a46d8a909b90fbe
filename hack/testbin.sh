#!/usr/bin/env bash
# Builds the real parts of the local fleet (etcd, kube-apiserver, cluster-gateway, Kyverno and its
# CLI, Flux's source-controller, KubeVela's vela-core and OPA Gatekeeper) from the Go module proxy through the wrapper modules in e2e/testbin, into a
# cache outside the clone so that a fresh clone on the same machine reuses them. Installs
# Prometheus and Chromium from Debian when they are missing.
#
# Usage: hack/testbin.sh [COMPONENT...]: only the components named (each make target builds only
# what it runs: `make demo` needs neither KubeVela nor the browser), every one without arguments.
# Components: prometheus chromium etcd kube-apiserver kube-controller-manager kubectl
# cluster-gateway kyverno kyverno-1.16 kyverno-cli source-controller kubevela gatekeeper.
# Prints where the binaries are on its last line (the directory the e2e harness reads).
set -euo pipefail

all_components="prometheus chromium etcd kube-apiserver kube-controller-manager kubectl cluster-gateway kyverno kyverno-1.16 kyverno-cli source-controller kubevela gatekeeper"
components=" ${*:-$all_components} "
for c in $components; do
	case " $all_components " in
	*" $c "*) ;;
	*) echo "testbin: unknown component $c (known: $all_components)" >&2; exit 2 ;;
	esac
done
# wanted COMPONENT: whether it was asked for.
wanted() { [[ "$components" == *" $1 "* ]]; }

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${POLICYHUB_TESTBIN:-${XDG_CACHE_HOME:-$HOME/.cache}/policyhub/testbin}
mkdir -p "$cache"

say() { printf 'testbin: %s\n' "$*" >&2; }

# build NAME VERSION MODULE-DIR LDFLAGS PKG OUT [PKG OUT ...]
# With build_nice=N set, go build runs at that niceness (the largest builds leave the machine usable).
build_nice=
build() {
	local name=$1 version=$2 dir=$3 ldflags=$4
	shift 4
	local dest="$cache/$name-$version"
	local missing=()
	while [ $# -gt 0 ]; do
		[ -x "$dest/$2" ] || missing+=("$1" "$2")
		shift 2
	done
	if [ ${#missing[@]} -eq 0 ]; then
		say "$name $version: cached in $dest"
		return
	fi
	mkdir -p "$dest"
	set -- "${missing[@]}"
	while [ $# -gt 0 ]; do
		local pkg=$1 out=$2 start=$SECONDS
		shift 2
		say "$name $version: building $out (cold builds take minutes; progress below is go's)"
		# Build to a temporary name first so an interrupted build never looks cached.
		(cd "$root/e2e/testbin/$dir" && ${build_nice:+nice -n "$build_nice"} go build -trimpath -ldflags "$ldflags" -o "$dest/.$out.tmp" "$pkg")
		mv "$dest/.$out.tmp" "$dest/$out"
		say "$name $version: built $out in $((SECONDS - start))s"
	done
}

# debian_install COMMAND PACKAGE: installs Debian's PACKAGE when COMMAND is not on PATH.
debian_install() {
	local command=$1 package=$2
	if ! command -v "$command" >/dev/null 2>&1; then
		say "$package: installing Debian's $package"
		if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
		$sudo apt-get update -qq
		# Without Recommends: a headless browser needs no desktop (upower, mesa...).
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$package" >/dev/null
	fi
	say "$package: $(command -v "$command")"
}

# The e2e test that runs the hub chart's dashboard and alert queries on a real Prometheus.
if wanted prometheus; then debian_install prometheus prometheus; fi
# The web view's tests drive a headless Chromium (chromedp runs it from PATH).
if wanted chromium; then debian_install chromium chromium; fi

# etcd v3.6, not Debian's 3.4: kube-apiserver 1.36 needs RequestWatchProgress for watches that
# start without a resourceVersion. e2e/fleet/testbin.go names the same version.
if wanted etcd; then
	build etcd v3.6.8 etcd "-s -w" \
		go.etcd.io/etcd/server/v3 etcd
fi

k8s_version=v1.36.3
k8s_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36"
for program in kube-apiserver kube-controller-manager kubectl; do
	if wanted "$program"; then
		build kube-apiserver "$k8s_version" kube-apiserver "$k8s_ldflags" k8s.io/kubernetes/cmd/$program $program
	fi
done
if wanted cluster-gateway; then
	build cluster-gateway v1.9.1 cluster-gateway "-s -w" \
		github.com/oam-dev/cluster-gateway/cmd/apiserver cluster-gateway
fi
if wanted kyverno; then
	build kyverno v1.19.1 kyverno "-s -w" \
		github.com/kyverno/kyverno/cmd/kyverno kyverno \
		github.com/kyverno/kyverno/cmd/reports-controller reports-controller
fi
# Kyverno 1.16, the oldest a real fleet still runs (it serves the CEL policy kinds only as
# v1beta1), for the clusters a test asks to run it (fleet.ManagedCluster.KyvernoVersion). Its module is not in the
# checksum database: e2e/testbin/kyverno-v1.16/go.sum pins its hash, which every build verifies.
if wanted kyverno-1.16; then
	build kyverno v1.16.3 kyverno-v1.16 "-s -w" \
		github.com/kyverno/kyverno/cmd/kyverno kyverno \
		github.com/kyverno/kyverno/cmd/reports-controller reports-controller
	# Its CRDs, for the clusters that run it: fetched through the wrapper module, whose go.sum
	# verifies the download (outside it the checksum database is asked, and answers 404).
	(cd "$root/e2e/testbin/kyverno-v1.16" && GOFLAGS=-mod=mod GOWORK=off go mod download github.com/kyverno/kyverno)
fi
if wanted kyverno-cli; then
	build kyverno v1.19.1 kyverno "-s -w" \
		github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno kyverno-cli
fi
# Flux's source-controller: it serves the Git repositories PolicySets read (issue 27).
if wanted source-controller; then
	build source-controller v1.9.3 source-controller "-s -w" \
		github.com/fluxcd/source-controller source-controller
fi
# KubeVela's controller, to run the kyverno-policy policy under the real thing (issue 16), and its
# CLI, which enables addons (config/kubevela/addon).
if wanted kubevela; then
	build kubevela v1.10.6 kubevela "-s -w -X github.com/oam-dev/kubevela/version.VelaVersion=v1.10.6" \
		github.com/oam-dev/kubevela/cmd/core vela-core \
		github.com/oam-dev/kubevela/references/cmd/cli vela
fi
# OPA Gatekeeper, a second policy engine a managed cluster can run (fleet.WithGatekeeper, issue 47):
# webhook, audit and status are one binary (its main package is the module root), chosen by
# --operation. CGO_ENABLED=0 as upstream's Dockerfile builds it. At nice 10: its cold build is long.
if wanted gatekeeper; then
	build_nice=10 CGO_ENABLED=0 build gatekeeper v3.23.1 gatekeeper \
		"-s -w -X github.com/open-policy-agent/gatekeeper/v3/pkg/version.Version=v3.23.1" \
		github.com/open-policy-agent/gatekeeper/v3 gatekeeper
fi

# Modules whose CRDs the fleet installs (e2e/fleet/testbin.go names the same versions): fetched
# now so that tests never wait on a download. Every fleet installs the first four (the hub's CRDs
# include KubeVela's Application); Flux's only with source-controller.
crd_modules="github.com/kyverno/kyverno@v1.19.1 github.com/openreports/reports-api@v0.2.1 open-cluster-management.io/api@v1.1.0 github.com/oam-dev/kubevela@v1.10.6"
if wanted source-controller; then crd_modules="$crd_modules github.com/fluxcd/source-controller@v1.9.3"; fi
if wanted gatekeeper; then crd_modules="$crd_modules github.com/open-policy-agent/gatekeeper/v3@v3.23.1"; fi
if wanted kube-apiserver; then
	for module in $crd_modules; do
		(cd "${TMPDIR:-/tmp}" && GOFLAGS=-mod=mod GOWORK=off go mod download "$module")
	done
	say "CRD modules: in the Go module cache"
fi

echo "$cache"
