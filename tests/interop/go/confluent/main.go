// Command confluent drives exactly with confluent-kafka-go 0.11.6 (Debian's
// golang-github-confluentinc-confluent-kafka-go-dev, linked against Debian's librdkafka 2.0.2) for
// tests/interop/test_go_clients.py.
//
// Usage: confluent BOOTSTRAP SCENARIO [flags]
//
// Every result is one JSON object per line on stdout; a failure the scenario does not expect ends the
// program with status 1 and a {"fatal": "..."} line. Scenarios:
//
//	produce  -topic T -count N -prefix P   idempotent producer (acks=all): N records keyed P-key-i with
//	                                       value P-value-i and header "seq"=i; one line per delivery report
//	consume  -topic T -group G -count N    subscribe-mode consumer that reads N records from the earliest
//	                                       offset, commits them synchronously and closes; one line per record
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/kafka"
)

var out = json.NewEncoder(os.Stdout)

func emit(v map[string]interface{}) {
	if err := out.Encode(v); err != nil {
		panic(err)
	}
}

func fatal(format string, args ...interface{}) {
	emit(map[string]interface{}{"fatal": fmt.Sprintf(format, args...)})
	os.Exit(1)
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: confluent BOOTSTRAP SCENARIO [flags]")
		os.Exit(2)
	}
	bootstrap, scenario := os.Args[1], os.Args[2]
	flags := flag.NewFlagSet(scenario, flag.ExitOnError)
	topic := flags.String("topic", "", "topic")
	group := flags.String("group", "", "consumer group")
	count := flags.Int("count", 0, "records")
	prefix := flags.String("prefix", "confluent-go", "key/value prefix")
	timeout := flags.Duration("timeout", 40*time.Second, "give up after")
	if err := flags.Parse(os.Args[3:]); err != nil {
		fatal("%v", err)
	}
	switch scenario {
	case "produce":
		produce(bootstrap, *topic, *count, *prefix, *timeout)
	case "consume":
		consume(bootstrap, *topic, *group, *count, *timeout)
	default:
		fatal("unknown scenario %q", scenario)
	}
}

func produce(bootstrap, topic string, count int, prefix string, timeout time.Duration) {
	producer, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers":  bootstrap,
		"enable.idempotence": true,
		"acks":               "all",
		"linger.ms":          5,
		"message.timeout.ms": int(timeout / time.Millisecond),
	})
	if err != nil {
		fatal("new producer: %v", err)
	}
	reports := make(chan kafka.Event, count)
	for i := 0; i < count; i++ {
		err := producer.Produce(&kafka.Message{
			TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Key:            []byte(fmt.Sprintf("%s-key-%d", prefix, i)),
			Value:          []byte(fmt.Sprintf("%s-value-%d", prefix, i)),
			Headers:        []kafka.Header{{Key: "seq", Value: []byte(strconv.Itoa(i))}},
		}, reports)
		if err != nil {
			fatal("produce: %v", err)
		}
	}
	for i := 0; i < count; i++ {
		m, ok := (<-reports).(*kafka.Message)
		if !ok {
			fatal("unexpected delivery event")
		}
		if m.TopicPartition.Error != nil {
			fatal("delivery: %v", m.TopicPartition.Error)
		}
		emit(map[string]interface{}{
			"key": string(m.Key), "value": string(m.Value),
			"partition": m.TopicPartition.Partition, "offset": int64(m.TopicPartition.Offset),
		})
	}
	producer.Close()
}

func consume(bootstrap, topic, group string, count int, timeout time.Duration) {
	consumer, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers":  bootstrap,
		"group.id":           group,
		"auto.offset.reset":  "earliest",
		"enable.auto.commit": false,
	})
	if err != nil {
		fatal("new consumer: %v", err)
	}
	if err := consumer.Subscribe(topic, nil); err != nil {
		fatal("subscribe: %v", err)
	}
	deadline := time.Now().Add(timeout)
	seen := 0
	for seen < count && time.Now().Before(deadline) {
		m, err := consumer.ReadMessage(200 * time.Millisecond)
		if err != nil {
			if e, ok := err.(kafka.Error); ok && e.Code() == kafka.ErrTimedOut {
				continue
			}
			emit(map[string]interface{}{"event": "error", "error": err.Error()})
			continue
		}
		headers := map[string]string{}
		for _, h := range m.Headers {
			headers[h.Key] = string(h.Value)
		}
		emit(map[string]interface{}{
			"key": string(m.Key), "value": string(m.Value), "partition": m.TopicPartition.Partition,
			"offset": int64(m.TopicPartition.Offset), "headers": headers,
		})
		seen++
	}
	if seen > 0 {
		if _, err := consumer.Commit(); err != nil {
			fatal("commit: %v", err)
		}
	}
	if err := consumer.Close(); err != nil {
		fatal("close: %v", err)
	}
	emit(map[string]interface{}{"event": "closed", "consumed": seen, "timed_out": seen < count})
}
