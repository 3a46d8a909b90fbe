package tenantcel

// The allow-lists. A name is here because what it does is known and pure: it reads only its
// arguments (no cluster, network, registry or clock). Kyverno's own libraries are left out on
// purpose, pure ones included: each is one namespace away from one that is not (http,
// resource, globalContext, image, imagedata), and the sandbox is simpler to trust when it holds
// no Kyverno name at all.

// Allowed is the allow-list as the refusal messages say it.
const Allowed = "the variables object, oldObject, request, namespaceObject and variables; " +
	"CEL's operators, macros (has, all, exists, exists_one, map, filter, cel.bind) and standard functions; " +
	"the string, list, set, math, regex, base64 and optional libraries; " +
	"Kubernetes' quantity, URL, IP, CIDR, semver and format libraries"

// variables are the identifiers an expression may read: the admission request, the namespace
// of the resource, and the policy's own variables. Not params (another object, possibly of
// another namespace), authorizer (asks the API server), exceptions, nor any library's handle.
var variables = set("object", "oldObject", "request", "namespaceObject", "variables")

// typeNames are the identifiers of CEL's types, for type(x) == string and the like.
var typeNames = set("bool", "bytes", "double", "int", "uint", "string", "list", "map",
	"null_type", "type", "optional_type")

// globalFunctions may be called as f(args): operators (as the parser names them), the internal
// functions of the standard macros' expansions, conversions, and the namespaced functions of the
// pure libraries (namespaced calls are resolved by their qualified name, math.ceil, before any
// member call on an identifier math).
var globalFunctions = set(
	// Operators.
	"_?_:_", "_&&_", "_||_", "!_", "-_", "_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_",
	"_+_", "_-_", "_*_", "_/_", "_%_", "_[_]", "_[?_]", "_?._", "@in", "_in_", "in",
	// The expansions of the standard macros (all, exists, exists_one).
	"@not_strictly_false", "__not_strictly_false__",
	// Standard functions callable globally.
	"size", "matches", "int", "uint", "double", "bool", "string", "bytes", "timestamp",
	"duration", "type", "dyn",
	// Optional values.
	"optional.of", "optional.ofNonZeroValue", "optional.none", "optional.unwrap",
	// Strings, lists, sets, math, base64, regex (cel-go's extensions as Kyverno loads them).
	"strings.quote", "lists.range",
	"sets.contains", "sets.equivalent", "sets.intersects",
	"math.greatest", "math.least", "math.ceil", "math.floor", "math.round", "math.trunc", "math.isInf", "math.isNaN",
	"math.isFinite", "math.abs", "math.sign", "math.sqrt", "math.bitAnd", "math.bitOr",
	"math.bitXor", "math.bitNot", "math.bitShiftLeft", "math.bitShiftRight",
	"base64.encode", "base64.decode",
	"regex.replace", "regex.extract", "regex.extractAll",
	// Kubernetes' libraries: quantity, URL, IP, CIDR, semver, format.
	"quantity", "isQuantity", "url", "isURL", "ip", "isIP", "ip.isCanonical", "cidr", "isCIDR",
	"semver", "isSemver",
	"format.named", "format.dns1123Label", "format.dns1123Subdomain", "format.dns1035Label",
	"format.qualifiedName", "format.dns1123LabelPrefix", "format.dns1123SubdomainPrefix",
	"format.dns1035LabelPrefix", "format.labelValue", "format.uri", "format.uuid", "format.byte",
	"format.date", "format.datetime",
)

// memberFunctions may be called as x.f(args), on any value the expression may reach.
var memberFunctions = set(
	// Standard.
	"size", "contains", "startsWith", "endsWith", "matches",
	"getFullYear", "getMonth", "getDayOfYear", "getDate", "getDayOfMonth", "getDayOfWeek",
	"getHours", "getMinutes", "getSeconds", "getMilliseconds",
	// Optional values.
	"hasValue", "value", "or", "orValue", "unwrapOpt",
	// Strings.
	"charAt", "indexOf", "lastIndexOf", "lowerAscii", "upperAscii", "replace", "split",
	"substring", "trim", "join", "reverse", "format",
	// Lists (cel-go's and Kubernetes').
	"slice", "flatten", "sort", "distinct",
	"isSorted", "sum", "min", "max",
	// Kubernetes' regex, URL, quantity, IP, CIDR, semver and format values.
	"find", "findAll",
	"getScheme", "getHost", "getHostname", "getPort", "getEscapedPath", "getQuery",
	"sign", "isGreaterThan", "isLessThan", "compareTo", "asApproximateFloat", "asInteger",
	"isInteger", "add", "sub",
	"family", "isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast",
	"isGlobalUnicast", "ip",
	"containsIP", "containsCIDR", "prefixLength", "masked",
	"major", "minor", "patch",
	"validate",
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
