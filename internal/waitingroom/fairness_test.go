package waitingroom_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/waitingroom"
)

// The fairness experiment: on each simulated morning, 500 patients arrive at
// uniformly random instants between 06:55 and 07:00, and a bot starts at
// 06:55:00.000 sharp — before anyone — sending 50 requests per second. The
// clock is simulated (so a morning takes milliseconds), the queue is a real
// Redis. Seeds are fixed, so the statistics below are the same on every run.
const (
	patients   = 500
	botRate    = 50 // requests per second
	preOpening = 5 * time.Minute
)

// trialCount is the number of simulated mornings (BERTH_FAIRNESS_TRIALS
// overrides, for a longer run).
func trialCount(t *testing.T, def int) int {
	if v := os.Getenv("BERTH_FAIRNESS_TRIALS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10 {
			t.Fatalf("BERTH_FAIRNESS_TRIALS=%q: want an integer ≥ 10", v)
		}
		return n
	}
	return def
}

type arrival struct {
	at       time.Duration // after 06:55
	identity string
	bot      bool
}

// morningRun simulates one morning on day (a fresh window occurrence, so a
// fresh queue) and returns the final (post-opening) position of every
// ticket the bot holds, plus the queue length. botRequests is how many
// requests the bot sends, 1/botRate apart from 06:55:00.000; fresh gives the
// bot a new identity per request (many accounts or addresses) instead of one.
func morningRun(t *testing.T, rm *waitingroom.Room, clk *clock, rng *rand.Rand, day, botRequests int, fresh bool) (botPositions []int64, queue int64) {
	t.Helper()
	ctx := context.Background()
	start := time.Date(2027, 3, 1, 6, 55, 0, 0, madrid).AddDate(0, 0, day)
	var evs []arrival
	for i := range patients {
		evs = append(evs, arrival{at: time.Duration(rng.Int64N(int64(preOpening))), identity: fmt.Sprintf("patient-%d", i)})
	}
	for i := range botRequests {
		id := "bot"
		if fresh {
			id = fmt.Sprintf("bot-%d", i)
		}
		evs = append(evs, arrival{at: time.Duration(i) * time.Second / botRate, identity: id, bot: true})
	}
	slices.SortStableFunc(evs, func(a, b arrival) int { return int(a.at - b.at) })
	botTickets := map[string]bool{}
	var lastBotPos int64
	for _, ev := range evs {
		clk.Set(start.Add(ev.at))
		tk, err := rm.Issue(ctx, "c1", ev.identity, ev.identity)
		if err != nil {
			t.Fatal(err)
		}
		if ev.bot {
			if !fresh {
				// One identity, one ticket: hammering returns the same
				// ticket, and its position never improves.
				if len(botTickets) == 1 && !botTickets[tk.Token] {
					t.Fatalf("the bot's request at +%v got a second ticket", ev.at)
				}
				if tk.Position < lastBotPos {
					t.Fatalf("the bot's position improved from %d to %d by asking again", lastBotPos, tk.Position)
				}
				lastBotPos = tk.Position
			} else if botTickets[tk.Token] {
				t.Fatal("two fresh identities got the same ticket")
			}
			botTickets[tk.Token] = true
		}
	}
	// Positions are final at the opening: no later arrival gets ahead.
	clk.Set(start.Add(preOpening))
	for tok := range botTickets {
		st, err := rm.Status(ctx, "c1", tok)
		if err != nil {
			t.Fatal(err)
		}
		botPositions = append(botPositions, st.Position)
	}
	wantTickets := 1
	if fresh {
		wantTickets = botRequests
	}
	if len(botTickets) != wantTickets {
		t.Fatalf("the bot holds %d tickets, want %d", len(botTickets), wantTickets)
	}
	return botPositions, int64(patients + wantTickets)
}

// TestFairnessBotVersusUniform is the must-show fairness test. The bot's
// final position, over many mornings, must be indistinguishable from a
// uniformly random draw among everyone who arrived before 07:00:
// a Kolmogorov–Smirnov test against Uniform, and a one-sided mean-rank test
// for an advantage (a lower mean position). Both statistics are logged.
func TestFairnessBotVersusUniform(t *testing.T) {
	_, rdb := redisClient(t)
	clk := &clock{}
	rng := rand.New(rand.NewPCG(20270301, 700))
	rm := waitingroom.NewRoom(windows(t, morning), keyring(t, key2, key1), rdb,
		waitingroom.Options{Now: clk.Now, Rand: rng.Uint64, Logger: quiet})

	// One morning with the bot hammering at 50 requests/s for the whole five
	// minutes (15,000 requests): one ticket, never a better position.
	pos, n := morningRun(t, rm, clk, rng, 0, botRate*int(preOpening/time.Second), false)
	t.Logf("full-rate bot: %d requests over 5 min, one ticket, final position %d of %d", botRate*300, pos[0], n)

	// Many mornings with the bot sending its first second of requests (the
	// rest only return the same ticket, as shown above).
	trials := trialCount(t, 300)
	u := make([]float64, 0, trials)
	for day := 1; day <= trials; day++ {
		pos, n := morningRun(t, rm, clk, rng, day, botRate, false)
		u = append(u, (float64(pos[0])-0.5)/float64(n))
	}
	d, pKS := ksUniform(u)
	mean, z, pMean := meanRankTest(u)
	t.Logf("one bot identity, %d mornings × %d patients: KS D = %.4f, p = %.3f; mean normalised position %.4f (uniform: 0.5), z = %.2f, one-sided p(advantage) = %.3f",
		trials, patients, d, pKS, mean, z, pMean)
	if pKS < 0.01 || pMean < 0.01 {
		t.Fatalf("the bot's positions are not uniform: KS p = %.4f, mean-rank p = %.4f", pKS, pMean)
	}
}

// TestFairnessFreshIdentitiesOneTicketEach: a bot that comes with a fresh
// identity on every request gets one ticket per identity, each placed like
// any patient's — no advantage per ticket. (Its many tickets are many
// lottery entries; that is what identities cost: verified accounts, and
// per-address limits at the router.)
func TestFairnessFreshIdentitiesOneTicketEach(t *testing.T) {
	_, rdb := redisClient(t)
	clk := &clock{}
	rng := rand.New(rand.NewPCG(20270302, 701))
	rm := waitingroom.NewRoom(windows(t, morning), keyring(t, key2), rdb,
		waitingroom.Options{Now: clk.Now, Rand: rng.Uint64, Logger: quiet})
	trials := trialCount(t, 60) / 2
	var u, best []float64
	for day := 1; day <= trials; day++ {
		pos, n := morningRun(t, rm, clk, rng, day, botRate, true)
		for _, p := range pos {
			u = append(u, (float64(p)-0.5)/float64(n))
		}
		// The best of the bot's k tickets vs the best of k uniform draws
		// without replacement from n: P(min > m) = C(n−m, k)/C(n, k).
		m := slices.Min(pos)
		best = append(best, minOfDrawsPIT(m, n, int64(len(pos)), rng.Float64()))
	}
	d, pKS := ksUniform(u)
	mean, z, pMean := meanRankTest(u)
	db, pBest := ksUniform(best)
	t.Logf("fresh identity per request, %d mornings × %d tickets: per-ticket KS D = %.4f, p = %.3f; mean %.4f, z = %.2f, p(advantage) = %.3f; best-of-%d vs best of %d uniform draws: KS D = %.4f, p = %.3f",
		trials, botRate, d, pKS, mean, z, pMean, botRate, botRate, db, pBest)
	if pKS < 0.01 || pMean < 0.01 || pBest < 0.01 {
		t.Fatalf("fresh-identity tickets are not placed uniformly: KS p = %.4f, mean p = %.4f, best p = %.4f", pKS, pMean, pBest)
	}
}

// TestFairnessStatisticHasPower: the same statistic on first-come-first-
// served (a window that opens the moment it starts) flags the bot, which
// then always comes first — the test above is not vacuous.
func TestFairnessStatisticHasPower(t *testing.T) {
	_, rdb := redisClient(t)
	clk := &clock{}
	rng := rand.New(rand.NewPCG(20270303, 702))
	fcfs := `[{"clinic_id":"c1","timezone":"Europe/Madrid","start":"06:55","opens_at":"06:55","end":"07:30","admit_per_second":2}]`
	rm := waitingroom.NewRoom(windows(t, fcfs), keyring(t, key2), rdb,
		waitingroom.Options{Now: clk.Now, Rand: rng.Uint64, Logger: quiet})
	var u []float64
	for day := 1; day <= 30; day++ {
		pos, n := morningRun(t, rm, clk, rng, day, botRate, false)
		u = append(u, (float64(pos[0])-0.5)/float64(n))
	}
	d, pKS := ksUniform(u)
	_, z, pMean := meanRankTest(u)
	t.Logf("control, first come first served: KS D = %.4f, p = %.2g; mean-rank z = %.2f, p = %.2g", d, pKS, z, pMean)
	if pKS > 1e-6 || pMean > 1e-6 {
		t.Fatalf("the statistic failed to flag a bot that always comes first: KS p = %g, mean p = %g", pKS, pMean)
	}
}

// ksUniform is the one-sample Kolmogorov–Smirnov test of u against
// Uniform(0,1): the statistic D and its asymptotic p-value (with the
// Stephens correction for small n).
func ksUniform(u []float64) (d, p float64) {
	s := slices.Clone(u)
	slices.Sort(s)
	n := float64(len(s))
	for i, x := range s {
		d = max(d, float64(i+1)/n-x, x-float64(i)/n)
	}
	sq := math.Sqrt(n)
	return d, kolmogorovQ((sq + 0.12 + 0.11/sq) * d)
}

// kolmogorovQ is P(K > λ) for the Kolmogorov distribution.
func kolmogorovQ(lambda float64) float64 {
	if lambda < 0.2 {
		return 1
	}
	sum, sign := 0.0, 1.0
	for k := 1; k <= 100; k++ {
		term := sign * 2 * math.Exp(-2*float64(k*k)*lambda*lambda)
		sum += term
		if math.Abs(term) < 1e-12 {
			return math.Min(1, math.Max(0, sum))
		}
		sign = -sign
	}
	return 1
}

// meanRankTest compares the mean of u with 1/2 (variance 1/12 per draw): the
// z score and the one-sided p-value of the bot being ahead (a low mean).
func meanRankTest(u []float64) (mean, z, p float64) {
	for _, x := range u {
		mean += x
	}
	n := float64(len(u))
	mean /= n
	z = (mean - 0.5) / math.Sqrt(1/(12*n))
	return mean, z, 0.5 * math.Erfc(-z/math.Sqrt2)
}

// minOfDrawsPIT is the randomised probability integral transform of m, the
// best (lowest) of k positions drawn without replacement from 1..n: the
// point v of the way through (P(min < m), P(min ≤ m)]. With v uniform it is
// exactly Uniform(0,1) when m has that distribution.
func minOfDrawsPIT(m, n, k int64, v float64) float64 {
	// P(min > x) = C(n−x, k) / C(n, k) = Π_{i<k} (n−x−i)/(n−i)
	surv := func(x int64) float64 {
		if n-x < k {
			return 0
		}
		p := 1.0
		for i := int64(0); i < k; i++ {
			p *= float64(n-x-i) / float64(n-i)
		}
		return p
	}
	lo, hi := 1-surv(m-1), 1-surv(m)
	return lo + v*(hi-lo)
}
