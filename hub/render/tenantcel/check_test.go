package tenantcel

import (
	"errors"
	"strings"
	"testing"
)

// accepted are expressions a tenant writes in practice: they must pass.
var accepted = []string{
	"object.metadata.labels['tier'] == 'edge'",
	"has(object.metadata.labels) && 'team' in object.metadata.labels",
	"object.spec.template.spec.containers.all(c, !c.image.endsWith(':latest'))",
	"object.spec.containers.exists(c, c.name.startsWith('istio-'))",
	"object.spec.containers.exists_one(c, c.name == 'app')",
	"object.spec.containers.map(c, c.image).filter(i, i.contains('@sha256:')).size() > 0",
	"object.metadata.name.matches('^web-[a-z]+$')",
	"object.metadata.name.lowerAscii().split('-')[0] == 'web'",
	"request.operation == 'CREATE' && request.userInfo.username.startsWith('system:serviceaccount:')",
	"oldObject == null || object.spec.replicas >= oldObject.spec.replicas",
	"namespaceObject.metadata.labels['env'] != 'prod'",
	"variables.images.all(i, i.startsWith('registry.corp/'))",
	"cel.bind(c, object.spec.containers, c.size() <= 5)",
	"object.?metadata.?annotations['owner'].orValue('') != ''",
	"optional.of(object.metadata.name).hasValue()",
	"quantity(object.spec.containers[0].resources.limits.memory).isLessThan(quantity('2Gi'))",
	"url(object.spec.url).getHost() == 'example.com' && isURL(object.spec.url)",
	"ip('10.0.0.1').family() == 4 && cidr('10.0.0.0/8').containsIP(ip('10.0.0.1'))",
	"semver(object.metadata.labels['version']).isGreaterThan(semver('1.0.0'))",
	"!format.dns1123Label().validate(object.metadata.name).hasValue()",
	"math.greatest(object.spec.replicas, 1) <= 10 && math.abs(-1) == 1",
	"sets.contains(['a', 'b', 'c'], object.spec.tags)",
	"strings.quote(object.metadata.name) != '' && base64.encode(b'x') == 'eA=='",
	"object.spec.ports.map(p, p.port).sortBy(p, p)[0] >= 1024",
	"lists.range(3).all(i, i < 3) && [1, 2, 2].distinct().size() == 2",
	"object.metadata.labels.all(k, v, k.size() < 64 && v.size() < 64)",
	"'%s-%d'.format([object.metadata.name, 1]) != ''",
	"type(object.spec.replicas) == int && int(object.spec.replicas) < 10",
	"timestamp(object.metadata.creationTimestamp).getFullYear() > 2020",
	"duration('1h') > duration('1m')",
	"[1, 2, 3].sum() == 6 && [1, 2].isSorted() && 'abc'.find('b') == 'b'",
	"object.spec.containers.all(c, c.resources.limits.?cpu.hasValue())",
	"{'a': object.metadata.name}['a'] == object.metadata.name",
	"regex.replace(object.metadata.name, '-', '_') != ''",
	"object.?spec.?replicas.optMap(r, r * 2).orValue(0) < 10",
	"object.spec.containers.transformList(i, c, c.image).size() < 10",
	"object.metadata.labels.transformMap(k, v, k.startsWith('x'), v.size()).size() < 5",
	"object.metadata.labels.exists(k, v, k == 'team' && v != '') && [1, 2].existsOne(i, v, v == 2)",
	"math.least(1, 2, object.spec.replicas) >= 0",
	"cel.bind(name, object.metadata.name, cel.bind(n, name.size(), n < 64))",
	// A comprehension variable may take any name, that of a library's handle too: it is the
	// element, and what it may do is still the allow-list's.
	"object.spec.containers.all(http, http.name != '')",
}

// refused are expressions that reach outside the namespace, or that the checker does not know:
// each with what its refusal must name.
var refused = []struct{ expression, names string }{
	// Kyverno's libraries, every one, in both spellings where Kyverno has two.
	{"http.Get('http://192.0.2.1/x') != null", "calls http.Get"},
	{"http.get('http://192.0.2.1/x') != null", "calls http.get"},
	{"http.Post('http://192.0.2.1/x', object, {}) != null", "calls http.Post"},
	{"http.Client('ca').Get('https://x') != null", "calls http.Client"},
	{"resource.List('v1', 'secrets', '').items.size() > 0", "calls resource.List"},
	{"resource.Get('v1', 'secrets', 'kube-system', 'token') != null", "calls resource.Get"},
	{"resource.Post('v1', 'configmaps', 'x', {}) != null", "calls resource.Post"},
	{"resource.list('v1', 'secrets', '') != null", "calls resource.list"},
	{"globalContext.Get('secrets', '') != null", "calls globalContext.Get"},
	{"image.GetMetadata('nginx').config != null", "calls image.GetMetadata"},
	{"imagedata.GetMetadata('nginx') != null", "calls imagedata.GetMetadata"},
	{"json.unmarshal('{}') != null", "calls json.unmarshal"},
	{"yaml.parse('a: b') != null", "calls yaml.parse"},
	{"x509.decode('pem') != null", "calls x509.decode"},
	{"time.now() > timestamp('2020-01-01T00:00:00Z')", "calls time.now"},
	{"random() != ''", "calls random"},
	{"sha256('x') != '' ", "calls sha256"},
	{"hash.md5('x') != ''", "calls hash.md5"},
	{"gzip.compress('x') != b''", "calls gzip.compress"},
	{"user.parseServiceAccount(request.userInfo.username).name != ''", "calls user.parseServiceAccount"},
	{"transform.listObjToMap([], [], 'a', 'b') != {}", "calls transform.listObjToMap"},
	{"image('nginx').registry() != ''", "calls image"},
	{"parseImageReference('nginx').registry() != ''", "calls parseImageReference"},
	// Variables other than the request's.
	{"params.spec.allowed", "reads params"},
	{"authorizer.group('').resource('secrets').check('get').allowed()", "calls authorizer.group"},
	{"exceptions.allowedValues.size() > 0", "reads exceptions"},
	{"http == null", "reads http"},
	// Hidden behind a binding, a comprehension, a list, a map, a condition.
	{"cel.bind(h, http, h.Get('http://x') != null)", "reads http"},
	{"[http].all(h, h.Get('http://x') != null)", "reads http"},
	{"object.spec.containers.all(c, http.Get(c.image) != null)", "calls http.Get"},
	{"object.spec.containers.all(http, http.Get('u') != null)", "calls http.Get"},
	{"{'k': resource.List('v1', 'secrets', '')}.size() > 0", "calls resource.List"},
	{"true ? true : http.Get('u') != null", "calls http.Get"},
	{"object.metadata.name.Get('x')", "calls object.metadata.name.Get"},
	{"[1].all(x, true) && x > 0", "reads x"},
	{"cel.bind(x, 1, x > 0) && x > 0", "reads x"},
	{"cel.bind(x, http, x != null)", "reads http"},
	{"[1].sortBy(x, http.Get('u'))[0] > 0", "calls http.Get"},
	{"object.spec.containers.transformList(i, c, http.Get(c.image)).size() > 0", "calls http.Get"},
	{"object.?spec.optMap(s, resource.List('v1', 'secrets', '')).hasValue()", "calls resource.List"},
	{"cel.bind(1, 2, 3)", "is not CEL the hub can parse: cel.bind takes variable names first"},
	{"cel.bind(x, 1)", "calls cel.bind"},
	// Kyverno's parser does not expand a two-argument existsOne (cel.NewEnv's macros): a call.
	{"[0].existsOne(x, x == 0)", "calls existsOne"},
	// Unknown, or not an expression the hub knows.
	{"frobnicate(object)", "calls frobnicate"},
	{"object.spec.frobnicate()", "calls object.spec.frobnicate"},
	{"google.protobuf.Int64Value{value: 1} != null", "builds a message of type google.protobuf.Int64Value"},
	{".object.metadata.name == 'a'", "reads .object"},
	{"object.metadata.name ==", "is not CEL the hub can parse"},
	{"has(object)", "is not CEL the hub can parse"},
}

func TestCheckAccepts(t *testing.T) {
	for _, e := range accepted {
		if err := Check("spec.validations[0].expression", e); err != nil {
			t.Errorf("%s: refused: %v", e, err)
		}
	}
}

func TestCheckRefuses(t *testing.T) {
	for _, tc := range refused {
		err := Check("spec.resources.matchConditions[2].expression", tc.expression)
		var r *Refusal
		if !errors.As(err, &r) {
			t.Errorf("%s: got %v, want a refusal", tc.expression, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "spec.resources.matchConditions[2].expression: "+tc.names) {
			t.Errorf("%s: got %q, want the field and %q", tc.expression, err, tc.names)
		}
	}
}

func TestRefusalMessage(t *testing.T) {
	err := Check("spec.resources.matchConditions[0].expression", "http.Get('http://192.0.2.1:8080/') != null")
	want := "spec.resources.matchConditions[0].expression: calls http.Get, which a tenant's CEL may not (allowed: the variables object, oldObject, request, namespaceObject and variables; "
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want %q...", err, want)
	}
	var r *Refusal
	if !errors.As(err, &r) || r.Function != "http.Get" {
		t.Fatalf("refusal %+v, want Function http.Get", r)
	}
}

func TestCheckBoundsLength(t *testing.T) {
	long := "object.metadata.name == '" + strings.Repeat("a", MaxExpressionLength) + "'"
	err := Check("spec.validations[0].expression", long)
	if err == nil || !strings.Contains(err.Error(), "characters long") {
		t.Fatalf("got %v, want the length refused", err)
	}
	deep := strings.Repeat("(", 5000) + "true" + strings.Repeat(")", 5000)
	if err := Check("spec.validations[0].expression", deep); err == nil {
		t.Fatal("an expression nested 5000 deep was accepted")
	}
}
