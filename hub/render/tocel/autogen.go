package tocel

import (
	"regexp"
	"strings"
)

// Autogen. A legacy rule matching Pods alone is also applied, by Kyverno, to the Pod templates
// of pod controllers, as chosen by the pod-policies.kyverno.io/autogen-controllers annotation
// (absent: all of them; "none": none). A ValidatingPolicy does the same through
// spec.autogen.podControllers.controllers, which names resources (deployments, cronjobs...) and
// rewrites object.spec / object.metadata in the policy's text to the template's. The converter
// therefore writes object.spec and object.metadata literally and always writes the controllers
// list explicitly.

const autogenAnnotation = "pod-policies.kyverno.io/autogen-controllers"

// controllerResources maps legacy controller kinds to ValidatingPolicy autogen names.
// ReplicationController has none: ValidatingPolicy autogen does not cover it.
var controllerResources = map[string]string{
	"DaemonSet":   "daemonsets",
	"Deployment":  "deployments",
	"Job":         "jobs",
	"StatefulSet": "statefulsets",
	"ReplicaSet":  "replicasets",
	"CronJob":     "cronjobs",
}

// legacyDefaultControllers is the legacy default when the annotation is absent.
var legacyDefaultControllers = []string{"DaemonSet", "Deployment", "Job", "StatefulSet", "ReplicaSet", "ReplicationController", "CronJob"}

// autogenControllers returns the ValidatingPolicy controllers for a pod-only policy and notes on
// what could not be carried over.
func autogenControllers(annotations map[string]any) (controllers []string, notes []string) {
	value, set := annotations[autogenAnnotation].(string)
	kinds := legacyDefaultControllers
	if set {
		if strings.TrimSpace(value) == "none" {
			return []string{}, nil
		}
		kinds = nil
		for _, k := range strings.Split(value, ",") {
			if k = strings.TrimSpace(k); k != "" {
				kinds = append(kinds, k)
			}
		}
	}
	controllers = []string{}
	for _, k := range kinds {
		if r, ok := controllerResources[k]; ok {
			controllers = append(controllers, r)
		} else {
			notes = append(notes, "autogen controller "+k+" has no ValidatingPolicy equivalent and is not covered")
		}
	}
	return controllers, notes
}

var autogenRef = regexp.MustCompile(`\b(object|oldObject)\.(spec|metadata)\b`)

// autogenRewrite rewrites an expression written for a Pod as Kyverno's ValidatingPolicy autogen
// does for the given controller resource (jobTemplate for cronjobs, template for the others).
// The oracle test uses it to evaluate converted expressions against Deployments and CronJobs.
func autogenRewrite(expr, controller string) string {
	prefix := ".spec.template."
	if controller == "cronjobs" {
		prefix = ".spec.jobTemplate.spec.template."
	}
	return autogenRef.ReplaceAllString(expr, "${1}"+prefix+"${2}")
}
