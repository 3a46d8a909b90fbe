// Package render turns a declaration into the Kyverno policy object policyhub writes in a managed
// cluster: the template as given, the mode override rewritten into the kind's own fields, the
// ownership labels and annotations, and a hash of the content — for the clusters placement chose
// and in the versions a rollout chose (hub/declare runs those first).
//
// It is pure: values in, values out, no clients. The same input always renders the same bytes.
package render
