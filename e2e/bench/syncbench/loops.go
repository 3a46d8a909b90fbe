package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/bench/benchkit"
	"github.com/policyhub/policyhub/e2e/fleet"
	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/render"
)

// policy is the i-th benchmark ClusterPolicy named prefix-i.
func policy(prefix string, i int) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(benchkit.Template(i)), &obj.Object); err != nil {
		panic(err)
	}
	obj.SetName(fmt.Sprintf("%s-%d", prefix, i))
	obj.SetLabels(map[string]string{"bench": prefix})
	return obj
}

// oneAtATime runs work for every policy in every cluster, one after the other.
func (b *bench) oneAtATime(work func(cluster string, i int) error) error {
	for _, c := range b.f.Managed {
		for i := range b.o.policies {
			if err := work(c.Name, i); err != nil {
				return fmt.Errorf("%s: %w", c.Name, err)
			}
		}
	}
	return nil
}

// perCluster runs work(cluster, i) for every policy i in every cluster, b.o.parallel at a time per
// cluster, the clusters at once.
func (b *bench) perCluster(work func(cluster string, i int) error) error {
	errs := make([]error, len(b.f.Managed))
	var wg sync.WaitGroup
	for k, c := range b.f.Managed {
		wg.Go(func() {
			if err := inParallel(b.o.parallel, b.o.policies, func(i int) error { return work(c.Name, i) }); err != nil {
				errs[k] = fmt.Errorf("%s: %w", c.Name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// plainPolicy is the i-th policy as a policy file would hold it (what the kubectl loop applies).
func plainPolicy(prefix string, i int) (*unstructured.Unstructured, error) {
	return policy(prefix, i), nil
}

// renderedPolicy is the i-th policy as policyhub writes it: rendered from a FleetPolicy, with
// the ownership labels and annotations (content hash, source) every object of policyhub carries.
// Writing those costs the clusters more than writing plain policies (bigger objects and managed
// fields), so the ceiling for policyhub's work is a bare loop writing these same objects.
func renderedPolicy(prefix string, i int) (*unstructured.Unstructured, error) {
	fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i)}}
	if err := yaml.Unmarshal([]byte(benchkit.Template(i)), &fp.Spec.Template); err != nil {
		return nil, err
	}
	// Another hub id than the policyhub run's: these objects are never policyhub's to prune.
	return render.FleetPolicy(hubID+"-ceiling", fp, nil)
}

// ssaLoop applies the objects objectFor makes, -parallel at a time per cluster, with a bare
// client (no throttling, no reads): the fastest these writes go through the same gateway.
func (b *bench) ssaLoop(objectFor func(prefix string, i int) (*unstructured.Unstructured, error), watched bool) func(ctx context.Context, prefix string) (cost, cost, error) {
	return func(ctx context.Context, prefix string) (cost, cost, error) {
		pass, stop, err := b.ssaPass(ctx, prefix, objectFor, watched)
		if err != nil {
			return cost{}, cost{}, err
		}
		defer stop()
		apply, err := b.measure(prefix, pass)
		if err != nil {
			return cost{}, cost{}, err
		}
		noop, err := b.measure(prefix, pass)
		return apply, noop, err
	}
}

// ssaPass prepares the SSA loop's clients and objects (and, when watched, a watch cache in every
// cluster, kept until stop) and returns one pass of the loop over every policy and cluster.
func (b *bench) ssaPass(ctx context.Context, prefix string, objectFor func(prefix string, i int) (*unstructured.Unstructured, error), watched bool) (pass func() error, stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	clients := map[string]client.Client{}
	for _, c := range b.f.Managed {
		cfg, err := gateway.ClusterConfig(b.f.Hub.Config, c.Name)
		if err != nil {
			return nil, stop, err
		}
		cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling: measure the clusters, not the limiter
		if clients[c.Name], err = client.New(cfg, client.Options{}); err != nil {
			return nil, stop, err
		}
		if watched {
			cancel, err := watchClusterPolicies(ctx, cfg)
			if err != nil {
				return nil, stop, fmt.Errorf("%s: %w", c.Name, err)
			}
			stops = append(stops, cancel)
		}
	}
	objects := make([]*unstructured.Unstructured, b.o.policies)
	for i := range objects {
		if objects[i], err = objectFor(prefix, i); err != nil {
			return nil, stop, err
		}
	}
	pass = func() error {
		return b.perCluster(func(cluster string, i int) error {
			return clients[cluster].Apply(ctx, client.ApplyConfigurationFromUnstructured(objects[i].DeepCopy()), client.FieldOwner("bench-ssa"), client.ForceOwnership)
		})
	}
	return pass, stop, nil
}

// watchClusterPolicies keeps a watch cache of the cluster's ClusterPolicies, through the gateway,
// until stopped: the watch policyhub's sync keeps, without the rest of policyhub.
func watchClusterPolicies(ctx context.Context, cfg *rest.Config) (stop func(), err error) {
	c, err := cache.New(cfg, cache.Options{DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return nil, err
	}
	policies := &unstructured.Unstructured{}
	policies.SetGroupVersionKind(schema.GroupVersionKind{Group: "kyverno.io", Version: "v1", Kind: "ClusterPolicy"})
	if _, err := c.GetInformer(ctx, policies); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("ClusterPolicy watch cache did not sync")
	}
	return cancel, nil
}

// kubectlLoop runs `kubectl apply` once per policy per cluster: as many at once as the other
// loops, or one at a time when serial.
func (b *bench) kubectlLoop(serial bool) func(ctx context.Context, prefix string) (cost, cost, error) {
	return func(ctx context.Context, prefix string) (cost, cost, error) {
		kubectl, err := fleet.KubectlPath()
		if err != nil {
			return cost{}, cost{}, err
		}
		dir, err := os.MkdirTemp(b.f.Dir, "kubectl-")
		if err != nil {
			return cost{}, cost{}, err
		}
		kubeconfigs := map[string]string{}
		for _, c := range b.f.Managed {
			if kubeconfigs[c.Name], err = b.f.GatewayKubeconfig(c.Name); err != nil {
				return cost{}, cost{}, err
			}
		}
		for i := range b.o.policies {
			data, err := yaml.Marshal(policy(prefix, i).Object)
			if err != nil {
				return cost{}, cost{}, err
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.yaml", i)), data, 0o644); err != nil {
				return cost{}, cost{}, err
			}
		}
		each := b.perCluster
		if serial {
			each = b.oneAtATime
		}
		loop := func() error {
			return each(func(cluster string, i int) error {
				cmd := exec.CommandContext(ctx, kubectl, "apply", "-f", filepath.Join(dir, fmt.Sprintf("%d.yaml", i)), "--kubeconfig", kubeconfigs[cluster])
				cmd.Env = append(os.Environ(), "KUBECACHEDIR="+filepath.Join(dir, "cache"))
				if out, err := cmd.CombinedOutput(); err != nil {
					return fmt.Errorf("kubectl apply: %v: %s", err, out)
				}
				return nil
			})
		}
		apply, err := b.measure(prefix, loop)
		if err != nil {
			return cost{}, cost{}, err
		}
		noop, err := b.measure(prefix, loop)
		return apply, noop, err
	}
}

// inParallel runs work(i) for i in [0, count), n at a time, and returns only the first error: a
// loop that fails tends to fail alike for every policy (hundreds of kubectl outputs), and one
// message says what went wrong.
func inParallel(n, count int, work func(i int) error) error {
	if errs := benchkit.InParallel(n, count, work); len(errs) > 0 {
		return errs[0]
	}
	return nil
}
