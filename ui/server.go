package ui

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/ui/pages"
	"github.com/policyhub/policyhub/ui/read"
)

// Source is the hub's state as the view reads it (read.Reader).
type Source interface {
	Snapshot(ctx context.Context, now time.Time) (*read.Snapshot, error)
	Summary(ctx context.Context, cluster string) (*policyhubv1.PolicyReportSummary, error)
	Subscribe() *read.Subscription
}

// Options configure the server.
type Options struct {
	// Guard admits requests before any page is served: the local token (LocalGuard) or the
	// Kubernetes API's authentication and authorization (in the hub).
	Guard func(http.Handler) http.Handler
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	Log logr.Logger
	// Coalesce is the shortest time between two change events to one page (1 s when zero): a
	// busy fleet refreshes a page at most once a second.
	Coalesce time.Duration
	// Viewer names who a request comes from, as the guard authenticated it: each viewer may hold
	// at most MaxStreamsPerViewer change streams. Nil: one viewer (the local user), bounded by
	// MaxStreams alone.
	Viewer func(*http.Request) string
	// Recheck, when set, checks a change stream's request again every RecheckEvery (a minute when
	// zero) while the stream is open, and ends the stream when it fails: a stream must not outlive
	// its viewer's token or right. Nil: the guard's check at the start holds (the local view).
	Recheck      func(*http.Request) error
	RecheckEvery time.Duration
	// MaxStreams bounds the change streams open at once (DefaultMaxStreams when zero);
	// MaxStreamsPerViewer bounds one viewer's (DefaultMaxStreamsPerViewer when zero; used only
	// with Viewer).
	MaxStreams, MaxStreamsPerViewer int
}

// FragmentHeader asks for a page's main part only: the script's refresh.
const FragmentHeader = "X-Policyhub-Fragment"

//go:embed templates/*.html
var templateFiles embed.FS

// Server serves the view.
type Server struct {
	src   Source
	o     Options
	pages map[string]*template.Template
	mux   *http.ServeMux
	// guarded is mux behind the guard.
	guarded http.Handler
	streams *streamLimit
}

// New returns the view's server.
func New(src Source, o Options) (*Server, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Coalesce == 0 {
		o.Coalesce = time.Second
	}
	if o.Guard == nil {
		return nil, errors.New("ui: no guard: the view is never served unauthenticated")
	}
	if o.RecheckEvery <= 0 {
		o.RecheckEvery = time.Minute
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	perViewer := 0
	if o.Viewer != nil {
		perViewer = o.MaxStreamsPerViewer
		if perViewer <= 0 {
			perViewer = DefaultMaxStreamsPerViewer
		}
	}
	s := &Server{src: src, o: o, pages: map[string]*template.Template{}, mux: http.NewServeMux(),
		streams: newStreamLimit(o.MaxStreams, perViewer)}
	layout, err := template.New("layout.html").Funcs(funcs()).ParseFS(templateFiles, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("ui templates: %w", err)
	}
	for _, page := range []string{"fleet", "inventory", "declaration", "cluster", "application", "error"} {
		t, err := template.Must(layout.Clone()).ParseFS(templateFiles, "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("ui template %s: %w", page, err)
		}
		s.pages[page] = t
	}
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/fleet", http.StatusFound) })
	s.mux.HandleFunc("GET /fleet", s.fleet)
	s.mux.HandleFunc("GET "+pages.InventoryURL, s.inventory)
	s.mux.HandleFunc("GET /policies/{kind}/{name}", s.declaration)
	s.mux.HandleFunc("GET /policies/{kind}/{namespace}/{name}", s.declaration)
	s.mux.HandleFunc("GET /clusters/{name}", s.cluster)
	s.mux.HandleFunc("GET /applications/{namespace}/{name}", s.application)
	s.mux.HandleFunc("GET /events", s.events)
	s.mux.HandleFunc("GET /static/{hash}/{file}", serveStatic)
	s.guarded = o.Guard(s.mux)
	return s, nil
}

// ServeHTTP serves a request: health unguarded, everything else through the guard.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok\n"))
		return
	}
	secureHeaders(w.Header())
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the view only reads: every action stays in kubectl", http.StatusMethodNotAllowed)
		return
	}
	s.guarded.ServeHTTP(w, r)
}

// secureHeaders: no script but the view's own, no framing, no referrer, nothing cached.
func secureHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
}

// view is what the layout renders around a page.
type view struct {
	Title string
	// Watch lists the topic prefixes the page follows ("*": every change).
	Watch  string
	Scope  read.Scope
	Now    time.Time
	Page   any
	Assets assets
}

func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) (*read.Snapshot, bool) {
	snap, err := s.src.Snapshot(r.Context(), s.o.Now())
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return nil, false
	}
	return snap, true
}

func (s *Server) fleet(w http.ResponseWriter, r *http.Request) {
	snap, ok := s.snapshot(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	f := pages.BuildFleet(snap, pages.FleetQuery{
		Selector: q.Get("selector"), Engine: q.Get("engine"), Kind: q.Get("kind"), Severity: q.Get("severity"), Category: q.Get("category"),
		RowPage: pageParam(q.Get("page")), ColPage: pageParam(q.Get("cpage")),
	})
	s.render(w, r, "fleet", view{Title: "Fleet", Watch: read.TopicAll, Scope: snap.Scope, Now: snap.Now, Page: f})
}

// inventory is the fleet's inventory of Kyverno legacy objects, from the summaries alone.
func (s *Server) inventory(w http.ResponseWriter, r *http.Request) {
	snap, ok := s.snapshot(w, r)
	if !ok {
		return
	}
	p := pages.BuildInventoryPage(snap, pageParam(r.URL.Query().Get("page")))
	s.render(w, r, "inventory", view{Title: "Legacy inventory", Watch: "cluster/ " + read.TopicInventory, Scope: snap.Scope, Now: snap.Now, Page: p})
}

// declarationPage is the declaration kind whose pages are under /policies/SINGULAR/: a kind that
// ships policies of its own.
func declarationPage(singular string) (policyhubv1.DeclarationKind, bool) {
	for _, k := range policyhubv1.DeclarationKinds() {
		if k.ShipsPolicies && k.Singular == singular {
			return k, true
		}
	}
	return policyhubv1.DeclarationKind{}, false
}

func (s *Server) declaration(w http.ResponseWriter, r *http.Request) {
	page, ok := declarationPage(r.PathValue("kind"))
	kind := page.Kind
	namespace := r.PathValue("namespace")
	if !ok || page.Namespaced != (namespace != "") {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no such page: %s (FleetPolicies and PolicySets are /policies/fleetpolicy/NAME and /policies/policyset/NAME, ApplicationPolicies /policies/applicationpolicy/NAMESPACE/NAME)", r.URL.Path))
		return
	}
	snap, ok := s.snapshot(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	q := r.URL.Query()
	d := pages.BuildDeclaration(snap, kind, namespace, name, pageParam(q.Get("page")), pageParam(q.Get(pages.PreviewPageParam)))
	if !d.Found {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("%s %s not found (or you may not read it)", kind, policyhubv1.PolicyRef(namespace, name)))
		return
	}
	watch := read.DeclarationTopic(kind, namespace, name) + " exception/"
	s.render(w, r, "declaration", view{Title: kind + " " + policyhubv1.PolicyRef(namespace, name), Watch: watch, Scope: snap.Scope, Now: snap.Now, Page: d})
}

func (s *Server) cluster(w http.ResponseWriter, r *http.Request) {
	snap, ok := s.snapshot(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	full, err := s.src.Summary(r.Context(), name)
	switch {
	case apierrors.IsNotFound(err):
		full = nil
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	c := pages.BuildCluster(snap, name, full)
	if !c.Inventory && !c.Reported && len(c.Declarations) == 0 {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("cluster %s is not in the fleet (or you may not read it)", name))
		return
	}
	s.render(w, r, "cluster", view{Title: "Cluster " + name, Watch: read.ClusterTopic(name) + " decl/ " + read.TopicInventory, Scope: snap.Scope, Now: snap.Now, Page: c})
}

func (s *Server) application(w http.ResponseWriter, r *http.Request) {
	snap, ok := s.snapshot(w, r)
	if !ok {
		return
	}
	a := pages.BuildApplication(pages.ApplicationFrom(snap, r.PathValue("namespace"), r.PathValue("name")))
	// Every exception: one living elsewhere (the platform's) may name the application's namespace.
	watch := "cluster/ " + read.DeclarationTopic(policyhubv1.KindApplicationPolicy, a.Namespace, "") + " exception/"
	s.render(w, r, "application", view{Title: "Application " + a.Namespace + "/" + a.Name, Watch: watch, Scope: snap.Scope, Now: snap.Now, Page: a})
}

// render writes a page, or only its main part when the script asks for it.
func (s *Server) render(w http.ResponseWriter, r *http.Request, page string, v view) {
	v.Assets = staticAssets
	name := "layout"
	if r.Header.Get(FragmentHeader) == "main" {
		name = "main"
	}
	var buf bytes.Buffer
	if err := s.pages[page].ExecuteTemplate(&buf, name, v); err != nil {
		s.o.Log.Error(err, "render", "page", page)
		http.Error(w, "the page could not be rendered: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// fail shows what went wrong as a page, with the status code.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	if code >= 500 {
		s.o.Log.Error(err, "serve", "path", r.URL.Path)
	}
	v := view{Title: http.StatusText(code), Page: err.Error(), Assets: staticAssets, Now: s.o.Now()}
	var buf bytes.Buffer
	if terr := s.pages["error"].ExecuteTemplate(&buf, "layout", v); terr != nil {
		http.Error(w, err.Error(), code)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// pageParam is a 1-based page number from the URL, as a 0-based index (0 when absent or wrong).
func pageParam(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 {
		return 0
	}
	return n - 1
}
