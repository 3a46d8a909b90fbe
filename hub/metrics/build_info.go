package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/policyhub/policyhub/internal/buildinfo"
)

// RegisterBuildInfo registers policyhub_build_info: always 1, labelled with the hub's build, as
// Prometheus' own *_build_info metrics are (a dashboard joins it to show which version runs).
func RegisterBuildInfo(reg prometheus.Registerer, build buildinfo.Info) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "policyhub_build_info",
		Help:        "The policyhub-hub build: version, commit, build date and Go version, as labels; always 1.",
		ConstLabels: prometheus.Labels{"version": build.Version, "commit": build.Commit, "build_date": build.Date, "go_version": build.GoVersion},
	}, func() float64 { return 1 }))
}
