// Command vapbench measures the agent's background evaluation of ValidatingAdmissionPolicies
// (agent/evaluate) on a local fleet's real kube-apiserver: it writes policies (each bound, each
// matching every Deployment) and Deployments spread over namespaces, then runs the evaluation
// the agent runs (paged lists through the API server, the API server's own admission code) a
// few times in this process and prints a Markdown table: time per full evaluation, the part of
// it that is judging (the same objects held in memory, judged again without listing), Go heap
// held by the results, and the process's RSS. `make bench-vap` runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/policyhub/policyhub/agent/evaluate"
	"github.com/policyhub/policyhub/e2e/bench/benchkit"
	"github.com/policyhub/policyhub/e2e/bench/procstat"
	"github.com/policyhub/policyhub/e2e/fleet"
)

type options struct {
	objects, policies, namespaces, parallel, runs int
	heapProfile                                   string
}

func main() {
	ctrllog.SetLogger(logr.Discard())
	var o options
	flag.IntVar(&o.objects, "objects", 10_000, "Deployments in the cluster.")
	flag.IntVar(&o.policies, "policies", 20, "ValidatingAdmissionPolicies, each bound, each matching every Deployment.")
	flag.IntVar(&o.namespaces, "namespaces", 100, "Namespaces the Deployments are spread over.")
	flag.IntVar(&o.parallel, "parallel", 8, "Concurrent writes while filling the cluster.")
	flag.IntVar(&o.runs, "runs", 3, "Full evaluations timed.")
	flag.StringVar(&o.heapProfile, "heap-profile", "", "If set, a file where the heap profile is written after the evaluations (go tool pprof).")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintf(os.Stderr, "vapbench: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	progress("starting a fleet of 1 managed cluster...")
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	f, err := fleet.Start(startCtx, fleet.Options{Managed: []fleet.ManagedCluster{{Name: "cluster-1"}}})
	cancel()
	if err != nil {
		return fmt.Errorf("start the fleet: %w", err)
	}
	defer f.Stop()
	cfg := rest.CopyConfig(f.Cluster("cluster-1").Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	progress("writing %d policies and %d Deployments in %d namespaces...", o.policies, o.objects, o.namespaces)
	start := time.Now()
	if err := fill(ctx, cfg, o); err != nil {
		return err
	}
	fillTime := time.Since(start)

	runner, err := evaluate.New(cfg, evaluate.Options{Timeout: 10 * time.Minute, MaxObjectsPerType: o.objects, MaxObjects: o.objects})
	if err != nil {
		return err
	}
	runtime.GC()
	heapBefore := benchkit.HeapNow()
	statBefore, err := procstat.Read(os.Getpid())
	if err != nil {
		return err
	}
	var full []time.Duration
	var res *evaluate.Result
	for i := range o.runs {
		progress("full evaluation %d/%d...", i+1, o.runs)
		res = nil
		runtime.GC()
		t := time.Now()
		res = runner.Evaluate(ctx)
		full = append(full, time.Since(t))
		if i > 0 && res.Judged != 0 {
			return fmt.Errorf("evaluation %d judged %d objects again, nothing having changed", i+1, res.Judged)
		}
		if res.NotEvaluated != "" {
			return fmt.Errorf("the evaluation left out: %s", res.NotEvaluated)
		}
	}
	runtime.GC()
	heap := benchkit.HeapNow()
	if o.heapProfile != "" {
		if err := writeHeapProfile(o.heapProfile); err != nil {
			return err
		}
	}
	stat, err := procstat.Read(os.Getpid())
	if err != nil {
		return err
	}
	judge, err := judgeOnly(ctx, cfg, o)
	if err != nil {
		return err
	}
	fails, passes := 0, 0
	for _, d := range res.Digests {
		for i := range d.Policies {
			fails += int(d.Policies[i].Counts.Fail)
			passes += int(d.Policies[i].Counts.Pass)
		}
	}
	fmt.Printf("\n### Background evaluation of ValidatingAdmissionPolicies (agent/evaluate)\n\n")
	fmt.Printf("%d Deployments in %d namespaces, %d policies (each bound, each matching every Deployment): %d judgements per evaluation; cluster filled in %s.\n\n",
		o.objects, o.namespaces, o.policies, o.objects*o.policies, fillTime.Round(time.Second))
	fmt.Println("| measure | value |")
	fmt.Println("|---|---|")
	for i, d := range full {
		what := "first: every object judged"
		if i > 0 {
			what = "again, nothing changed: lists only, no object judged again"
		}
		fmt.Printf("| evaluation %d, %s (paged lists of %d objects through the API server) | %s |\n", i+1, what, res.Objects, d.Round(time.Millisecond))
	}
	fmt.Printf("| judging only (the same objects in memory, %d judgements) | %s (%.1f µs per judgement) |\n", o.objects*o.policies, judge.Round(time.Millisecond),
		float64(judge.Microseconds())/float64(o.objects*o.policies))
	fmt.Printf("| results | %d digests: %d pass, %d fail |\n", len(res.Digests), passes, fails)
	fmt.Printf("| Go heap in use after GC: before the first evaluation → with the last one's results and the judged cache held | %.1f → %.1f MiB (+%.1f MiB) |\n",
		float64(heapBefore)/(1<<20), float64(heap)/(1<<20), (float64(heap)-float64(heapBefore))/(1<<20))
	fmt.Printf("| this process's RSS: before → after the evaluations (Go keeps the peak's pages a while) | %.1f → %.1f MiB |\n", float64(statBefore.RSS)/(1<<20), float64(stat.RSS)/(1<<20))
	return nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// judgeOnly lists every Deployment and policy once, holds them in memory and times judging them.
func judgeOnly(ctx context.Context, cfg *rest.Config, o options) (time.Duration, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	ps, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	bs, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	deps, err := dyn.Resource(appsv1.SchemeGroupVersion.WithResource("deployments")).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	in := evaluate.SetInput{AllNamespaces: true, Client: cs}
	for i := range ps.Items {
		in.Policies = append(in.Policies, &ps.Items[i])
	}
	for i := range bs.Items {
		in.Bindings = append(in.Bindings, &bs.Items[i])
	}
	for i := range nss.Items {
		in.Namespaces = append(in.Namespaces, &nss.Items[i])
	}
	set, _ := evaluate.NewSet(in)
	gvr := appsv1.SchemeGroupVersion.WithResource("deployments")
	start := time.Now()
	for i := range deps.Items {
		if _, err := set.Evaluate(ctx, &deps.Items[i], gvr); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// expressions are the policies' validations, typical of what teams write; policy i uses
// expressions[i % len].
var expressions = []string{
	"has(object.metadata.labels) && 'team' in object.metadata.labels",
	"object.spec.replicas <= 5",
	"object.spec.template.spec.containers.all(c, !c.image.endsWith(':latest'))",
	"object.spec.template.spec.containers.all(c, has(c.resources) && has(c.resources.limits) && 'memory' in c.resources.limits)",
	"!has(object.spec.template.spec.hostNetwork) || !object.spec.template.spec.hostNetwork",
}

// fill writes the namespaces, the policies and their bindings, and the Deployments (one in ten
// without a team label, with two replicas in four).
func fill(ctx context.Context, cfg *rest.Config, o options) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for i := range o.namespaces {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns(i, o.namespaces)}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for i := range o.policies {
		name := fmt.Sprintf("bench-vap-%02d", i)
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}}}},
				Validations: []admissionregistrationv1.Validation{{Expression: expressions[i%len(expressions)], Message: "bench rule " + name}}}}
		if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
		b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}}}
		if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	errs := benchkit.InParallel(o.parallel, o.objects, func(i int) error {
		labels := map[string]string{"app": fmt.Sprintf("app-%d", i), "app.oam.dev/name": fmt.Sprintf("app-%d", i%500)}
		if i%10 != 0 {
			labels["team"] = "t"
		}
		replicas := int32(1 + i%4)
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns(i, o.namespaces), Name: fmt.Sprintf("dep-%05d", i), Labels: labels},
			Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": labels["app"]}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": labels["app"]}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}}}
		_, err := cs.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
		return err
	})
	return errors.Join(errs...)
}

func ns(i, namespaces int) string { return fmt.Sprintf("bench-%03d", i%namespaces) }

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "vapbench: "+format+"\n", args...)
}
