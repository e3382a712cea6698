package conformance_test

// The portable specs of controller-runtime's pkg/manager (manager_test.go
// at v0.25.2, and at v0.23.3 for the floor run; both Apache-2.0, as this
// repository), run once per mode (modes_test.go). Each spec keeps
// upstream's text, setup and every assertion; the one change is that
// New, the constructor, is the mode's: manager.New, or NewGuard and
// Guard.NewManager. The specs that need the package's internals are
// listed in notportable_test.go, with why; upstream_test.go checks the
// two lists against the upstream file in the module cache.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Upstream's specs live in package manager; these names let them read the
// same here.
type (
	Options      = manager.Options
	Manager      = manager.Manager
	Runnable     = manager.Runnable
	RunnableFunc = manager.RunnableFunc
)

// managerSpecs declares the portable specs, each building its managers
// with New.
func managerSpecs(New newManagerFunc) {
	It := boundedIt

	Describe("manger.Manager", func() {
		Describe("New", func() {
			It("should return an error if there is no Config", func() {
				m, err := New(nil, Options{})
				Expect(m).To(BeNil())
				Expect(err.Error()).To(ContainSubstring("must specify Config"))
			})

			It("should return an error if it can't create a RestMapper", func() {
				expected := fmt.Errorf("expected error: RestMapper")
				m, err := New(cfg, Options{
					MapperProvider: func(c *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) { return nil, expected },
				})
				Expect(m).To(BeNil())
				Expect(err).To(Equal(expected))
			})

			It("should return an error it can't create a client.Client", func() {
				m, err := New(cfg, Options{
					NewClient: func(config *rest.Config, options client.Options) (client.Client, error) {
						return nil, errors.New("expected error")
					},
				})
				Expect(m).To(BeNil())
				Expect(err).To(HaveOccurred())
				Expect(err.Error()).To(ContainSubstring("expected error"))
			})

			It("should return an error it can't create a cache.Cache", func() {
				m, err := New(cfg, Options{
					NewCache: func(config *rest.Config, opts cache.Options) (cache.Cache, error) {
						return nil, fmt.Errorf("expected error")
					},
				})
				Expect(m).To(BeNil())
				Expect(err).To(HaveOccurred())
				Expect(err.Error()).To(ContainSubstring("expected error"))
			})

			It("should create a client defined in by the new client function", func() {
				m, err := New(cfg, Options{
					NewClient: func(config *rest.Config, options client.Options) (client.Client, error) {
						return nil, nil
					},
				})
				Expect(m).ToNot(BeNil())
				Expect(err).ToNot(HaveOccurred())
				Expect(m.GetClient()).To(BeNil())
			})

			It("should lazily initialize a webhook server if needed", func() {
				By("creating a manager with options")
				m, err := New(cfg, Options{WebhookServer: webhook.NewServer(webhook.Options{Port: 9440, Host: "foo.com"})})
				Expect(err).NotTo(HaveOccurred())
				Expect(m).NotTo(BeNil())

				By("checking options are passed to the webhook server")
				svr := m.GetWebhookServer()
				Expect(svr).NotTo(BeNil())
				Expect(svr.(*webhook.DefaultServer).Options.Port).To(Equal(9440))
				Expect(svr.(*webhook.DefaultServer).Options.Host).To(Equal("foo.com"))
			})

			It("should not initialize a webhook server if Options.WebhookServer is set", func() {
				By("creating a manager with options")
				srv := webhook.NewServer(webhook.Options{Port: 9440})
				m, err := New(cfg, Options{WebhookServer: srv})
				Expect(err).NotTo(HaveOccurred())
				Expect(m).NotTo(BeNil())

				By("checking the server contains the Port set on the webhook server and not passed to Options")
				svr := m.GetWebhookServer()
				Expect(svr).NotTo(BeNil())
				Expect(svr).To(Equal(srv))
				Expect(svr.(*webhook.DefaultServer).Options.Port).To(Equal(9440))
			})

			It("should allow passing a custom webhook.Server implementation", func() {
				type customWebhook struct {
					webhook.Server
				}
				m, err := New(cfg, Options{WebhookServer: customWebhook{}})
				Expect(err).NotTo(HaveOccurred())
				Expect(m).NotTo(BeNil())

				svr := m.GetWebhookServer()
				Expect(svr).NotTo(BeNil())

				_, isCustomWebhook := svr.(customWebhook)
				Expect(isCustomWebhook).To(BeTrue())
			})

			if !floor() { // a v0.25 spec: v0.23.3's manager_test.go has no such spec
				It("should create a webhook server that is disabled", func(specCtx SpecContext) {
					By("setting the port to -1", func() {
						srv := webhook.NewServer(webhook.Options{Port: -1})
						m, err := New(cfg, Options{WebhookServer: srv})
						Expect(err).NotTo(HaveOccurred())
						Expect(m).NotTo(BeNil())

						svr := m.GetWebhookServer()
						Expect(svr).NotTo(BeNil())
						Expect(svr.(*webhook.DefaultServer).Options.Port).To(Equal(-1))
						Expect(svr.Start(specCtx)).NotTo(HaveOccurred())
						Expect(svr.WebhookMux()).ToNot(BeNil())
					})
				})
			}

			Context("with leader election enabled", func() {
				It("should return an error if namespace not set and not running in cluster", func() {
					m, err := New(cfg, Options{LeaderElection: true, LeaderElectionID: "controller-runtime"})
					Expect(m).To(BeNil())
					Expect(err).To(HaveOccurred())
					Expect(err.Error()).To(ContainSubstring("unable to find leader election namespace: not running in-cluster, please specify LeaderElectionNamespace"))
				})
			})

			It("should be able to create a manager with a cache that fails on missing informer", func() {
				m, err := New(cfg, Options{
					Cache: cache.Options{
						ReaderFailOnMissingInformer: true,
					},
				})
				Expect(m).ToNot(BeNil())
				Expect(err).ToNot(HaveOccurred())
			})
		})

		Describe("Start", func() {
			startSuite := func(options Options, callbacks ...func(Manager)) {
				It("should Start each Component", func(ctx SpecContext) {
					m, err := New(cfg, options)
					Expect(err).NotTo(HaveOccurred())
					for _, cb := range callbacks {
						cb(m)
					}
					var wgRunnableStarted sync.WaitGroup
					wgRunnableStarted.Add(2)
					Expect(m.Add(RunnableFunc(func(context.Context) error {
						defer GinkgoRecover()
						wgRunnableStarted.Done()
						return nil
					}))).To(Succeed())

					Expect(m.Add(RunnableFunc(func(context.Context) error {
						defer GinkgoRecover()
						wgRunnableStarted.Done()
						return nil
					}))).To(Succeed())

					go func() {
						defer GinkgoRecover()
						Expect(m.Elected()).ShouldNot(BeClosed())
						Expect(m.Start(ctx)).NotTo(HaveOccurred())
					}()

					<-m.Elected()
					wgRunnableStarted.Wait()
				})

				It("should not manipulate the provided config", func() {
					// strip WrapTransport, cause func values are PartialEq, not Eq --
					// specifically, for reflect.DeepEqual, for all functions F,
					// F != nil implies F != F, which means no full equivalence relation.
					cfg := rest.CopyConfig(cfg)
					cfg.WrapTransport = nil
					originalCfg := rest.CopyConfig(cfg)
					// The options object is shared by multiple tests, copy it
					// into our scope so we manipulate it for this testcase only
					options := options
					// Upstream clears options.newResourceLock here, an
					// unexported field that only its leader-election
					// context sets (not portable); the defaults context
					// ported here never sets it.
					m, err := New(cfg, options)
					Expect(err).NotTo(HaveOccurred())
					for _, cb := range callbacks {
						cb(m)
					}
					Expect(m.GetConfig()).To(Equal(originalCfg))
				})

				It("should stop when context is cancelled", func(specCtx SpecContext) {
					m, err := New(cfg, options)
					Expect(err).NotTo(HaveOccurred())
					for _, cb := range callbacks {
						cb(m)
					}
					ctx, cancel := context.WithCancel(specCtx)
					cancel()
					Expect(m.Start(ctx)).NotTo(HaveOccurred())
				})

				It("should start the cache before starting anything else", func(ctx SpecContext) {
					fakeCache := &startSignalingInformer{Cache: &informertest.FakeInformers{}}
					options.NewCache = func(_ *rest.Config, _ cache.Options) (cache.Cache, error) {
						return fakeCache, nil
					}
					m, err := New(cfg, options)
					Expect(err).NotTo(HaveOccurred())
					for _, cb := range callbacks {
						cb(m)
					}

					runnableWasStarted := make(chan struct{})
					runnable := RunnableFunc(func(ctx context.Context) error {
						defer GinkgoRecover()
						if !fakeCache.wasSynced {
							return errors.New("runnable got started before cache was synced")
						}
						close(runnableWasStarted)
						return nil
					})
					Expect(m.Add(runnable)).To(Succeed())

					go func() {
						defer GinkgoRecover()
						Expect(m.Start(ctx)).ToNot(HaveOccurred())
					}()

					<-runnableWasStarted
				})

				It("should start additional clusters before anything else", func(ctx SpecContext) {
					fakeCache := &startSignalingInformer{Cache: &informertest.FakeInformers{}}
					options.NewCache = func(_ *rest.Config, _ cache.Options) (cache.Cache, error) {
						return fakeCache, nil
					}
					m, err := New(cfg, options)
					Expect(err).NotTo(HaveOccurred())
					for _, cb := range callbacks {
						cb(m)
					}

					additionalClusterCache := &startSignalingInformer{Cache: &informertest.FakeInformers{}}
					additionalCluster, err := cluster.New(cfg, func(o *cluster.Options) {
						o.NewCache = func(_ *rest.Config, _ cache.Options) (cache.Cache, error) {
							return additionalClusterCache, nil
						}
					})
					Expect(err).NotTo(HaveOccurred())
					Expect(m.Add(additionalCluster)).NotTo(HaveOccurred())

					runnableWasStarted := make(chan struct{})
					Expect(m.Add(RunnableFunc(func(ctx context.Context) error {
						defer GinkgoRecover()
						if !fakeCache.wasSynced {
							return errors.New("WaitForCacheSyncCalled wasn't called before Runnable got started")
						}
						if !additionalClusterCache.wasSynced {
							return errors.New("the additional clusters WaitForCacheSync wasn't called before Runnable got started")
						}
						close(runnableWasStarted)
						return nil
					}))).To(Succeed())

					go func() {
						defer GinkgoRecover()
						Expect(m.Start(ctx)).ToNot(HaveOccurred())
					}()

					<-runnableWasStarted
				})

				It("should return an error if any Components fail to Start", func(ctx SpecContext) {
					m, err := New(cfg, options)
					Expect(err).NotTo(HaveOccurred())
					for _, cb := range callbacks {
						cb(m)
					}

					Expect(m.Add(RunnableFunc(func(ctx context.Context) error {
						defer GinkgoRecover()
						<-ctx.Done()
						return nil
					}))).To(Succeed())

					Expect(m.Add(RunnableFunc(func(context.Context) error {
						defer GinkgoRecover()
						return fmt.Errorf("expected error")
					}))).To(Succeed())

					Expect(m.Add(RunnableFunc(func(context.Context) error {
						defer GinkgoRecover()
						return nil
					}))).To(Succeed())

					err = m.Start(ctx)
					Expect(err).To(HaveOccurred())
					Expect(err.Error()).To(Equal("expected error"))
				})

				It("should start caches added after Manager has started", func(ctx SpecContext) {
					fakeCache := &startSignalingInformer{Cache: &informertest.FakeInformers{}}
					options.NewCache = func(_ *rest.Config, _ cache.Options) (cache.Cache, error) {
						return fakeCache, nil
					}
					m, err := New(cfg, options)
					Expect(err).NotTo(HaveOccurred())
					for _, cb := range callbacks {
						cb(m)
					}

					runnableWasStarted := make(chan struct{})
					Expect(m.Add(RunnableFunc(func(ctx context.Context) error {
						defer GinkgoRecover()
						if !fakeCache.wasSynced {
							return errors.New("WaitForCacheSyncCalled wasn't called before Runnable got started")
						}
						close(runnableWasStarted)
						return nil
					}))).To(Succeed())

					go func() {
						defer GinkgoRecover()
						Expect(m.Start(ctx)).ToNot(HaveOccurred())
					}()

					<-runnableWasStarted

					additionalClusterCache := &startSignalingInformer{Cache: &informertest.FakeInformers{}}
					fakeCluster := &startClusterAfterManager{informer: additionalClusterCache}

					Expect(err).NotTo(HaveOccurred())
					Expect(m.Add(fakeCluster)).NotTo(HaveOccurred())

					Eventually(func() bool {
						fakeCluster.informer.mu.Lock()
						defer fakeCluster.informer.mu.Unlock()
						return fakeCluster.informer.wasStarted && fakeCluster.informer.wasSynced
					}).Should(BeTrue())
				})

				It("should wait for runnables to stop", func(specCtx SpecContext) {
					m, err := New(cfg, options)
					Expect(err).NotTo(HaveOccurred())
					for _, cb := range callbacks {
						cb(m)
					}

					var lock sync.Mutex
					var runnableDoneCount atomic.Int64
					runnableDoneFunc := func() {
						lock.Lock()
						defer lock.Unlock()
						runnableDoneCount.Add(1)
					}
					var wgRunnableRunning sync.WaitGroup
					wgRunnableRunning.Add(2)
					Expect(m.Add(RunnableFunc(func(ctx context.Context) error {
						wgRunnableRunning.Done()
						defer GinkgoRecover()
						defer runnableDoneFunc()
						<-ctx.Done()
						return nil
					}))).To(Succeed())

					Expect(m.Add(RunnableFunc(func(ctx context.Context) error {
						wgRunnableRunning.Done()
						defer GinkgoRecover()
						defer runnableDoneFunc()
						<-ctx.Done()
						time.Sleep(300 * time.Millisecond) // slow closure simulation
						return nil
					}))).To(Succeed())

					defer GinkgoRecover()
					ctx, cancel := context.WithCancel(specCtx)

					var wgManagerRunning sync.WaitGroup
					wgManagerRunning.Add(1)
					go func() {
						defer GinkgoRecover()
						defer wgManagerRunning.Done()
						Expect(m.Start(ctx)).NotTo(HaveOccurred())
						Eventually(runnableDoneCount.Load).Should(BeEquivalentTo(2))
					}()
					wgRunnableRunning.Wait()
					cancel()

					wgManagerRunning.Wait()
				})

				It("should return an error if any Components fail to Start and wait for runnables to stop", func(ctx SpecContext) {
					m, err := New(cfg, options)
					Expect(err).NotTo(HaveOccurred())
					for _, cb := range callbacks {
						cb(m)
					}
					defer GinkgoRecover()
					var lock sync.Mutex
					runnableDoneCount := 0
					runnableDoneFunc := func() {
						lock.Lock()
						defer lock.Unlock()
						runnableDoneCount++
					}

					Expect(m.Add(RunnableFunc(func(context.Context) error {
						defer GinkgoRecover()
						defer runnableDoneFunc()
						return fmt.Errorf("expected error")
					}))).To(Succeed())

					Expect(m.Add(RunnableFunc(func(ctx context.Context) error {
						defer GinkgoRecover()
						defer runnableDoneFunc()
						<-ctx.Done()
						return nil
					}))).To(Succeed())

					Expect(m.Start(ctx)).To(HaveOccurred())
					Expect(runnableDoneCount).To(Equal(2))
				})

				It("should refuse to add runnable if stop procedure is already engaged", func(specCtx SpecContext) {
					m, err := New(cfg, options)
					Expect(err).NotTo(HaveOccurred())
					for _, cb := range callbacks {
						cb(m)
					}
					defer GinkgoRecover()

					var wgRunnableRunning sync.WaitGroup
					wgRunnableRunning.Add(1)
					Expect(m.Add(RunnableFunc(func(ctx context.Context) error {
						wgRunnableRunning.Done()
						defer GinkgoRecover()
						<-ctx.Done()
						return nil
					}))).To(Succeed())

					ctx, cancel := context.WithCancel(specCtx)
					go func() {
						Expect(m.Start(ctx)).NotTo(HaveOccurred())
					}()
					wgRunnableRunning.Wait()
					cancel()
					time.Sleep(100 * time.Millisecond) // give some time for the stop chan closure to be caught by the manager
					Expect(m.Add(RunnableFunc(func(context.Context) error {
						defer GinkgoRecover()
						return nil
					}))).NotTo(Succeed())
				})

				It("should not return runnables context.Canceled errors", func(specCtx SpecContext) {
					Expect(options.Logger).To(BeZero(), "this test overrides Logger")

					var log struct {
						sync.Mutex
						messages []string
					}
					options.Logger = funcr.NewJSON(func(object string) {
						log.Lock()
						log.messages = append(log.messages, object)
						log.Unlock()
					}, funcr.Options{})

					m, err := New(cfg, options)
					Expect(err).NotTo(HaveOccurred())
					for _, cb := range callbacks {
						cb(m)
					}

					// Runnables may return ctx.Err() as shown in some [context.Context] examples.
					started := make(chan struct{})
					Expect(m.Add(RunnableFunc(func(ctx context.Context) error {
						close(started)
						<-ctx.Done()
						return ctx.Err()
					}))).To(Succeed())

					stopped := make(chan error)
					ctx, cancel := context.WithCancel(specCtx)
					go func() {
						stopped <- m.Start(ctx)
					}()

					// Wait for runnables to start, signal the manager, and wait for it to return.
					<-started
					cancel()
					Expect(<-stopped).To(Succeed())

					// The leader election goroutine emits one more log message after Start() returns.
					// Take the lock here to avoid a race between it writing to log.messages and the
					// following read from log.messages.
					if options.LeaderElection {
						log.Lock()
						defer log.Unlock()
					}

					Expect(log.messages).To(Not(ContainElement(
						ContainSubstring(context.Canceled.Error()),
					)))
				})

				It("should default controller logger from manager logger", func(specCtx SpecContext) {
					var lock sync.Mutex
					var messages []string
					options.Logger = funcr.NewJSON(func(object string) {
						lock.Lock()
						messages = append(messages, object)
						lock.Unlock()
					}, funcr.Options{})
					options.LeaderElection = false

					m, err := New(cfg, options)
					Expect(err).NotTo(HaveOccurred())
					for _, cb := range callbacks {
						cb(m)
					}

					started := make(chan struct{})
					Expect(m.Add(RunnableFunc(func(ctx context.Context) error {
						close(started)
						return nil
					}))).To(Succeed())

					stopped := make(chan error)
					ctx, cancel := context.WithCancel(specCtx)
					go func() {
						stopped <- m.Start(ctx)
					}()

					// Wait for runnables to start as a proxy for the manager being fully started.
					<-started
					cancel()
					Expect(<-stopped).To(Succeed())

					msg := "controller log message"
					m.GetControllerOptions().Logger.Info(msg)

					Eventually(func(g Gomega) {
						lock.Lock()
						defer lock.Unlock()

						g.Expect(messages).To(ContainElement(
							ContainSubstring(msg),
						))
					}).Should(Succeed())
				})

				It("should return only runnables error if stop doesn't error", func(ctx SpecContext) {
					m, err := New(cfg, options)
					Expect(err).NotTo(HaveOccurred())
					for _, cb := range callbacks {
						cb(m)
					}
					Expect(m.Add(RunnableFunc(func(context.Context) error {
						return runnableError{}
					}))).To(Succeed())
					err = m.Start(ctx)
					Expect(err).To(HaveOccurred())
					Expect(err.Error()).To(Equal("not feeling like that"))
					Expect(errors.Is(err, context.DeadlineExceeded)).ToNot(BeTrue())
					Expect(errors.Is(err, runnableError{})).To(BeTrue())
				})
			}

			Context("with defaults", func() {
				startSuite(Options{})
			})
		})

		It("should not leak goroutines when stopped", func(specCtx SpecContext) {
			currentGRs := goleak.IgnoreCurrent()

			m, err := New(cfg, Options{})
			Expect(err).NotTo(HaveOccurred())

			ctx, cancel := context.WithCancel(specCtx)
			cancel()
			Expect(m.Start(ctx)).NotTo(HaveOccurred())

			// force-close keep-alive connections.  These'll time anyway (after
			// like 30s or so) but force it to speed up the tests.
			closeIdleConnections()
			Eventually(func() error { return goleak.Find(currentGRs) }).Should(Succeed())
		})

		It("should not leak goroutines if the deprecated event broadcaster is used & events are emitted", func(specCtx SpecContext) {
			currentGRs := goleak.IgnoreCurrent()

			m, err := New(cfg, Options{ /* implicit: default setting for EventBroadcaster */ })
			Expect(err).NotTo(HaveOccurred())

			By("adding a runnable that emits an event")
			ns := corev1.Namespace{}
			ns.Name = "default"

			recorder := m.GetEventRecorderFor("rock-and-roll") //nolint:staticcheck
			Expect(m.Add(RunnableFunc(func(_ context.Context) error {
				recorder.Event(&ns, "Warning", "BallroomBlitz", "yeah, yeah, yeah-yeah-yeah")
				return nil
			}))).To(Succeed())

			By("starting the manager & waiting till we've sent our event")
			ctx, cancel := context.WithCancel(specCtx)
			doneCh := make(chan struct{})
			go func() {
				defer GinkgoRecover()
				defer close(doneCh)
				Expect(m.Start(ctx)).To(Succeed())
			}()
			<-m.Elected()

			Eventually(func() *corev1.Event {
				evts, err := clientset.CoreV1().Events("").SearchWithContext(ctx, m.GetScheme(), &ns)
				Expect(err).NotTo(HaveOccurred())

				for i, evt := range evts.Items {
					if evt.Reason == "BallroomBlitz" {
						return &evts.Items[i]
					}
				}
				return nil
			}).ShouldNot(BeNil())

			By("making sure there's no extra go routines still running after we stop")
			cancel()
			<-doneCh

			// force-close keep-alive connections.  These'll time anyway (after
			// like 30s or so) but force it to speed up the tests.
			closeIdleConnections()
			Eventually(func() error { return goleak.Find(currentGRs) }).Should(Succeed())
		})

		It("should not leak goroutines if the default event broadcaster is used & events are emitted", func(specCtx SpecContext) {
			currentGRs := goleak.IgnoreCurrent()

			m, err := New(cfg, Options{ /* implicit: default setting for EventBroadcaster */ })
			Expect(err).NotTo(HaveOccurred())

			By("adding a runnable that emits an event")
			ns := corev1.Namespace{}
			ns.Name = "default"

			recorder := m.GetEventRecorder("rock-and-roll")
			Expect(m.Add(RunnableFunc(func(_ context.Context) error {
				recorder.Eventf(&ns, nil, "Warning", "BallroomBlitz", "dance action", "yeah, yeah, yeah-yeah-yeah")
				return nil
			}))).To(Succeed())

			By("starting the manager & waiting till we've sent our event")
			ctx, cancel := context.WithCancel(specCtx)
			doneCh := make(chan struct{})
			go func() {
				defer GinkgoRecover()
				defer close(doneCh)
				Expect(m.Start(ctx)).To(Succeed())
			}()
			<-m.Elected()

			Eventually(func() *eventsv1.Event {
				evts, err := clientset.EventsV1().Events("").List(ctx,
					metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("regarding.name", ns.Name).String()})
				Expect(err).NotTo(HaveOccurred())

				for i, evt := range evts.Items {
					if evt.Reason == "BallroomBlitz" {
						return &evts.Items[i]
					}
				}
				return nil
			}).ShouldNot(BeNil())

			// Sleep between broadcasting start and shutdown to prevent a race condition
			// that causes goroutines to leak.
			// See pkg/internal/recorder/recorder.go:103 for more info.
			time.Sleep(3 * time.Second)

			By("making sure there's no extra go routines still running after we stop")
			cancel()
			<-doneCh

			// force-close keep-alive connections.  These'll time anyway (after
			// like 30s or so) but force it to speed up the tests.
			closeIdleConnections()
			Eventually(func() error { return goleak.Find(currentGRs) }).Should(Succeed())
		})

		It("should not leak goroutines when a runnable returns error slowly after being signaled to stop", func(specCtx SpecContext) {
			// This test reproduces the race condition where the manager's Start method
			// exits due to context cancellation, leaving no one to drain errChan

			currentGRs := goleak.IgnoreCurrent()

			// Create manager with a very short graceful shutdown timeout to reliablytrigger the race condition
			shortGracefulShutdownTimeout := 10 * time.Millisecond
			m, err := New(cfg, Options{
				GracefulShutdownTimeout: &shortGracefulShutdownTimeout,
			})
			Expect(err).NotTo(HaveOccurred())

			// Add the slow runnable that will return an error after some delay
			for range 3 {
				slowRunnable := RunnableFunc(func(c context.Context) error {
					<-c.Done()

					// Simulate some work that delays the error from being returned
					// Choosing a large delay to reliably trigger the race condition
					time.Sleep(100 * time.Millisecond)

					// This simulates the race condition where runnables try to send
					// errors after the manager has stopped reading from errChan
					return errors.New("slow runnable error")
				})

				Expect(m.Add(slowRunnable)).To(Succeed())
			}

			ctx, cancel := context.WithTimeout(specCtx, 50*time.Millisecond)
			defer cancel()
			go func() {
				defer GinkgoRecover()
				Expect(m.Start(ctx)).To(HaveOccurred()) // We expect error here because the slow runnables will return errors
			}()

			// Wait for context to be cancelled
			<-ctx.Done()

			// Give time for any leaks to become apparent. This makes sure that we don't false alarm on go routine leaks because runnables are still running.
			time.Sleep(300 * time.Millisecond)

			// force-close keep-alive connections
			closeIdleConnections()
			Eventually(func() error { return goleak.Find(currentGRs) }).Should(Succeed())
		})

		It("should provide a function to get the deprecated EventRecorder", func() {
			m, err := New(cfg, Options{})
			Expect(err).NotTo(HaveOccurred())
			Expect(m.GetEventRecorderFor("test")).NotTo(BeNil()) //nolint:staticcheck
		})
		It("should provide a function to get the EventRecorder", func() {
			m, err := New(cfg, Options{})
			Expect(err).NotTo(HaveOccurred())
			Expect(m.GetEventRecorder("test")).NotTo(BeNil())
		})
		It("should provide a function to get the APIReader", func() {
			m, err := New(cfg, Options{})
			Expect(err).NotTo(HaveOccurred())
			Expect(m.GetAPIReader()).NotTo(BeNil())
		})
	})
}

// The helpers upstream's specs use, as upstream defines them.

type runnableError struct{}

func (runnableError) Error() string {
	return "not feeling like that"
}

type startSignalingInformer struct {
	mu sync.Mutex

	// The manager calls Start and WaitForCacheSync in
	// parallel, so we have to protect wasStarted with a Mutex
	// and block in WaitForCacheSync until it is true.
	wasStarted bool
	// was synced will be true once Start was called and
	// WaitForCacheSync returned, just like a real cache.
	wasSynced bool
	cache.Cache
}

func (c *startSignalingInformer) Start(ctx context.Context) error {
	c.mu.Lock()
	c.wasStarted = true
	c.mu.Unlock()
	return c.Cache.Start(ctx)
}

func (c *startSignalingInformer) WaitForCacheSync(ctx context.Context) bool {
	defer func() {
		c.mu.Lock()
		c.wasSynced = true
		c.mu.Unlock()
	}()
	return c.Cache.WaitForCacheSync(ctx)
}

type startClusterAfterManager struct {
	informer *startSignalingInformer
}

func (c *startClusterAfterManager) Start(ctx context.Context) error {
	return c.informer.Start(ctx)
}

func (c *startClusterAfterManager) GetCache() cache.Cache {
	return c.informer
}
