package harness

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestProcessOutputExitAndLogFile(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("KUBECONFIG", "/somewhere")
	file := filepath.Join(t.TempDir(), "out.log")
	p := StartT(t, Options{Name: "sh", Path: "/bin/sh", Args: []string{"-c", `echo "{\"msg\":\"hello\",\"k\":\"$X\"}"; echo "kc=$KUBECONFIG" >&2; exit 3`}, Env: []string{"X=y"}, LogFile: file})
	g.Expect(p.WaitExit(10 * time.Second)).To(Equal(3))
	g.Expect(p.Exited()).To(BeTrue())
	g.Expect(p.ExitedAt()).To(BeTemporally(">=", p.Started()))
	g.Expect(p.Err()).To(HaveOccurred())
	g.Expect(p.Log.IndexWhere(KeyEquals("k", "y"))).To(Equal(0))
	g.Expect(p.Log.First("kc=")).To(Equal("kc="), "KUBECONFIG is not passed on")
	data, err := os.ReadFile(file)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal(p.Log.String()))

	_, _, err = p.WaitLine(context.Background(), 0, Contains("never"))
	g.Expect(err).To(MatchError(ContainSubstring("sh exited (exit status 3) without logging a line containing")))
	g.Expect(err).To(MatchError(ContainSubstring("output in " + file)))
}

func TestProcessSignalStopAndGroupKill(t *testing.T) {
	g := NewWithT(t)
	// The shell ignores TERM; Stop falls back to killing the group, the
	// shell's sleeping child included.
	p := StartT(t, Options{Name: "stubborn", Path: "/bin/sh", Args: []string{"-c", `trap "" TERM; echo started; sleep 60; echo never`}})
	g.Expect(p.WaitForLog("started", 10*time.Second)).To(Succeed())
	g.Expect(p.Signal(syscall.Signal(0))).To(Succeed())
	start := time.Now()
	p.Stop(200 * time.Millisecond)
	g.Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second))
	g.Expect(p.ExitCode()).To(Equal(-1), "killed by a signal")
	g.Expect(p.Signal(syscall.SIGTERM)).To(MatchError(os.ErrProcessDone))
	g.Expect(p.WaitForLog("never", time.Second)).To(MatchError(ContainSubstring("stubborn exited (signal: killed)")))

	q, err := Start(Options{Name: "sleeper", Path: "/bin/sh", Args: []string{"-c", "exec sleep 60"}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = q.WaitExit(50 * time.Millisecond)
	g.Expect(err).To(MatchError(ContainSubstring("sleeper: still running after 50ms")))
	StopAll(5 * time.Second)
	g.Expect(q.Exited()).To(BeTrue())
	g.Expect(q.Wait(context.Background())).To(Equal(q.ExitedAt()))
}
