package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// processCPUMetric is the Prometheus process collector's CPU counter,
// user and system seconds of the serving process; tide serve and tide dev
// export it on their metrics endpoint, as Kafka's JMX exporters and most
// brokers do under this name.
const processCPUMetric = "process_cpu_seconds_total"

// benchMetricsBodyBytesMax bounds what one scrape reads: a broker's
// metrics page is tens of KiB, so more is not a metrics page.
const benchMetricsBodyBytesMax = 16 << 20

// brokerCPUFigure is the CPU the brokers' processes used over a phase, read
// from their metrics endpoints (--broker-metrics): the brokers alone,
// without the client, when they run in processes of their own.
type brokerCPUFigure struct {
	Endpoints              int     `json:"endpoints"`
	BrokerCPUSeconds       float64 `json:"broker_cpu_seconds"`
	BrokerCPUSecondsPerGiB float64 `json:"broker_cpu_seconds_per_gib"`
}

// scrapeProcessCPU is the sum of process_cpu_seconds_total over the
// endpoints. Each endpoint is one process: list one per process, as a tide
// dev cluster's brokers share one.
func scrapeProcessCPU(ctx context.Context, endpoints []string) (float64, error) {
	total := 0.0
	for _, endpoint := range endpoints {
		seconds, err := scrapeOne(ctx, endpoint)
		if err != nil {
			return 0, fmt.Errorf("--broker-metrics %s: %w", endpoint, err)
		}
		total += seconds
	}
	return total, nil
}

func scrapeOne(ctx context.Context, endpoint string) (float64, error) {
	request, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return 0, err
	}
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		return 0, err
	}
	defer response.Body.Close()
	if response.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %s", response.Status)
	}
	return parseProcessCPU(bufio.NewScanner(io.LimitReader(response.Body, benchMetricsBodyBytesMax)))
}

// parseProcessCPU finds the counter's sample in Prometheus's text format.
func parseProcessCPU(lines *bufio.Scanner) (float64, error) {
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) >= 2 && fields[0] == processCPUMetric {
			return strconv.ParseFloat(fields[1], 64)
		}
	}
	if err := lines.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in the metrics", processCPUMetric)
}
