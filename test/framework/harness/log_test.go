package harness

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestParseLine(t *testing.T) {
	g := NewWithT(t)
	recv := time.Now()
	l := ParseLine(`{"level":"info","ts":"2026-12-02T17:27:58.123456789Z","msg":"FeatureGate changed; requesting shutdown","detectedBy":"reconcile","n":3,"diff":["a"]}`, recv)
	g.Expect(l.Msg).To(Equal("FeatureGate changed; requesting shutdown"))
	g.Expect(l.TS).To(Equal(time.Date(2026, 12, 2, 17, 27, 58, 123456789, time.UTC)))
	g.Expect(l.Get("detectedBy")).To(Equal("reconcile"))
	g.Expect(l.Get("n")).To(Equal("3"))
	g.Expect(l.Get("diff")).To(Equal(`["a"]`))
	g.Expect(l.Has("reason")).To(BeFalse())
	g.Expect(l.Get("reason")).To(BeEmpty())

	epoch := ParseLine(`{"level":"info","ts":1764696478.5,"msg":"x"}`, recv)
	g.Expect(epoch.TS.UnixMilli()).To(Equal(int64(1764696478500)))

	k := ParseLine(`I1202 17:27:58.1 leaderelection.go:1] successfully acquired lease`, recv)
	g.Expect(k.TS.IsZero()).To(BeTrue())
	g.Expect(k.At()).To(Equal(recv))
	g.Expect(k.Msg).To(Equal(k.Raw))
	g.Expect(k.Keys).To(BeNil())
}

func TestLogFindsByTextAndByKey(t *testing.T) {
	g := NewWithT(t)
	b := &Log{}
	_, _ = b.Write([]byte(`{"msg":"Error getting FeatureGate","retryIn":"1s"}` + "\n" + `{"msg":"FeatureGate changed; requesting shutdown","detectedBy":"verifier"}` + "\n"))
	_, _ = b.Write([]byte(`{"msg":"FeatureGate changed; requesting shutdown","detectedBy":"reconcile","reason":"x"}` + "\n" + "partial"))
	g.Expect(b.Len()).To(Equal(3))
	g.Expect(b.Count("requesting shutdown")).To(Equal(2))
	g.Expect(b.Index("Error getting", "retryIn")).To(Equal(0))
	g.Expect(b.First("nothing")).To(BeEmpty())
	g.Expect(b.IndexWhere(KeyEquals("detectedBy", "reconcile"))).To(Equal(2))
	g.Expect(b.IndexWhere(HasKey("reason"))).To(Equal(2))
	g.Expect(b.CountWhere(Message("requesting shutdown"))).To(Equal(2))
	g.Expect(b.CountWhere(Message("detectedBy"))).To(BeZero(), "keys are not the message")
	l, i, ok := b.FindFrom(2, All(Message("requesting"), KeyEquals("detectedBy", "reconcile")))
	g.Expect(ok).To(BeTrue())
	g.Expect(i).To(Equal(2))
	g.Expect(l.Get("reason")).To(Equal("x"))
	g.Expect(b.String()).To(HaveSuffix("\npartial"))
	b.Close()
	g.Expect(b.Lines()[3].Raw).To(Equal("partial"))
}

func TestLogHooksAndWait(t *testing.T) {
	g := NewWithT(t)
	b := &Log{}
	var once, every []string
	b.OnFirst(Contains("stop"), func(l Line) {
		// A hook may read the log: it runs outside the lock, after every
		// line of the write is in.
		once = append(once, l.Raw)
		g.Expect(b.Index("after")).To(Equal(1))
	})
	b.OnLine(func(l Line) { every = append(every, l.Raw) })
	_, _ = b.Write([]byte("stop\nafter\nstop\n"))
	g.Expect(once).To(Equal([]string{"stop"}))
	g.Expect(every).To(Equal([]string{"stop", "after", "stop"}))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, _ = b.Write([]byte(`{"msg":"late","k":"v"}` + "\n"))
	}()
	l, i, err := b.Wait(ctx, 1, KeyEquals("k", "v"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(i).To(Equal(3))
	g.Expect(l.Msg).To(Equal("late"))

	go func() {
		time.Sleep(20 * time.Millisecond)
		b.Close()
	}()
	_, _, err = b.Wait(ctx, 0, Contains("never"))
	g.Expect(errors.Is(err, ErrLogClosed)).To(BeTrue())
}
