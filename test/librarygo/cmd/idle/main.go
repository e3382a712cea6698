// Command idle runs library-go's FeatureGateAccess as a library-go
// operator does, and then does nothing else: the library-go side of the
// fleet harness's idle cost (test/fleet), measured against the guard's
// idle adopters (examples/consumer with no ConfigMaps) on the same API
// server. Its load on the API server is the config informers' (a list and
// a watch of FeatureGates and ClusterVersions) and the Events library-go
// records, and nothing more: what every library-go operator pays for its
// feature gates.
//
// With -access=guard it runs the guard's librarygo.Access in library-go's
// place, built from the same arguments by the one constructor an adopter
// changes, for the side-by-side measurements of make bench-librarygo;
// -ask-current then asks its Current as a busy controller would.
//
// It exits 0 when the enabled or disabled gates of its version change
// (library-go's ForceExit, the default change handler), 1 when the first
// gates are not observed within -initial-timeout, and 0 on SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	configclient "github.com/openshift/client-go/config/clientset/versioned"
	configinformers "github.com/openshift/client-go/config/informers/externalversions"
	"github.com/openshift/library-go/pkg/operator/configobserver/featuregates"
	"github.com/openshift/library-go/pkg/operator/events"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/featuregate-operator/operator/pkg/featuregate/librarygo"
)

// missingVersionMarker is the placeholder OpenShift builds carry until the
// payload substitutes the release version.
const missingVersionMarker = "0.0.1-snapshot"

func main() {
	kubeconfig := flag.String("kubeconfig", "", "Path of the kubeconfig.")
	version := flag.String("release-version", "", "Release version whose status.featureGates entry is read.")
	resync := flag.Duration("resync", 10*time.Minute, "Resync period of the config informers (library-go operators use 10 minutes).")
	initialTimeout := flag.Duration("initial-timeout", time.Minute, "How long to wait for the first gates, as library-go's documented construct does.")
	probeAddr := flag.String("health-probe-bind-address", "0", `Address of /readyz, 200 once the first gates are observed ("0": not served).`)
	eventsNamespace := flag.String("events-namespace", "default", `Namespace of the Events library-go records (FeatureGatesInitialized at start, FeatureGatesModified before a restart), as an operator's kube recorder does; "" logs them instead.`)
	accessKind := flag.String("access", "librarygo", `Which FeatureGateAccess: "librarygo" (library-go's own) or "guard" (librarygo.Access).`)
	askCurrent := flag.Duration("ask-current", 0, "With -access=guard, ask Current this often once the gates are observed (0: never), as a controller does before each write.")
	flag.Parse()
	if err := run(*kubeconfig, *version, *probeAddr, *eventsNamespace, *accessKind, *resync, *initialTimeout, *askCurrent); err != nil {
		fmt.Fprintln(os.Stderr, "idle:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, version, probeAddr, eventsNamespace, accessKind string, resync, initialTimeout, askCurrent time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	client, err := configclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("config client: %w", err)
	}
	informers := configinformers.NewSharedInformerFactory(client, resync)
	var recorder events.Recorder = events.NewLoggingEventRecorder("idle", clock.RealClock{})
	if eventsNamespace != "" {
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("kube client: %w", err)
		}
		ref := &corev1.ObjectReference{Kind: "Deployment", APIVersion: "apps/v1", Namespace: eventsNamespace, Name: "idle"}
		recorder = events.NewRecorder(kube.CoreV1().Events(eventsNamespace), "idle", ref, clock.RealClock{})
	}
	var access featuregates.FeatureGateAccess
	var current func() bool
	switch accessKind {
	case "librarygo":
		access = featuregates.NewFeatureGateAccess(version, missingVersionMarker,
			informers.Config().V1().ClusterVersions(), informers.Config().V1().FeatureGates(), recorder)
	case "guard":
		a, err := librarygo.NewFeatureGateAccess(cfg, version, missingVersionMarker, recorder)
		if err != nil {
			return err
		}
		access, current = a, a.Current
	default:
		return fmt.Errorf("-access=%q: want librarygo or guard", accessKind)
	}
	go access.Run(ctx)
	if accessKind == "librarygo" {
		informers.Start(ctx.Done())
	}

	timeout := time.NewTimer(initialTimeout)
	defer timeout.Stop()
	select {
	case <-access.InitialFeatureGatesObserved():
	case <-timeout.C:
		return fmt.Errorf("initial feature gates not observed within %s", initialTimeout)
	case <-ctx.Done():
		return nil
	}
	gates, err := access.CurrentFeatureGates()
	if err != nil {
		return fmt.Errorf("current feature gates: %w", err)
	}
	fmt.Printf("{\"msg\":\"Feature gates observed\",\"ts\":%q,\"known\":%d}\n", time.Now().Format(time.RFC3339Nano), len(gates.KnownFeatures()))
	if probeAddr != "0" {
		if err := serveReady(ctx, probeAddr); err != nil {
			return err
		}
	}
	if current != nil && askCurrent > 0 {
		tick := time.NewTicker(askCurrent)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				current()
			case <-ctx.Done():
				return nil
			}
		}
	}
	<-ctx.Done()
	return nil
}

// serveReady answers /readyz with 200 from now on: the gates are known.
func serveReady(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "idle: serve /readyz:", err)
		}
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return nil
}
