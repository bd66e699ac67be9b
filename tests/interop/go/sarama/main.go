// Command sarama drives exactly with Shopify/sarama 1.22 (Debian's golang-github-shopify-sarama-dev) for
// tests/interop/test_go_clients.py.
//
// Usage: sarama BOOTSTRAP SCENARIO [flags]
//
// Every result is one JSON object per line on stdout; a failure the scenario does not expect ends the
// program with status 1 and a {"fatal": "..."} line. Scenarios:
//
//	produce  -topic T -count N -prefix P   idempotent SyncProducer (acks=all): N records keyed P-key-i with
//	                                       value P-value-i and header "seq"=i; one line per record with the
//	                                       partition and offset it was written at
//	consume  -topic T -group G -count N    ConsumerGroup member that reads N records (from the oldest offset
//	                                       when the group has none), marks each, closes (committing) and
//	                                       prints one line per record
//	create   -topic T -partitions P        ClusterAdmin.CreateTopic (retention.ms=3600000), then again (an
//	                                       error); one line each
//	describe -topic T                      ClusterAdmin.DescribeTopics: the topic's partition ids
//	describe-config -topic T               ClusterAdmin.DescribeConfig: the topic's configs or the error
//	delete   -topic T                      ClusterAdmin.DeleteTopic, then DescribeTopics until the topic is
//	                                       gone; one line each
//
// sarama 1.22 commits with OffsetCommit v1 unless Consumer.Offsets.Retention is set (then v2); Kafka 4.0
// and exactly accept v2 and later only (KIP-896), so the consumer sets a retention.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

var out = json.NewEncoder(os.Stdout)
var outMu sync.Mutex

func emit(v map[string]interface{}) {
	outMu.Lock()
	defer outMu.Unlock()
	if err := out.Encode(v); err != nil {
		panic(err)
	}
}

func fatal(format string, args ...interface{}) {
	emit(map[string]interface{}{"fatal": fmt.Sprintf(format, args...)})
	os.Exit(1)
}

func errText(err error) interface{} {
	if err == nil {
		return nil
	}
	return err.Error()
}

func config(clientID string) *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = clientID
	c.Version = sarama.V2_0_0_0
	c.Metadata.Retry.Backoff = 200 * time.Millisecond
	c.Metadata.Retry.Max = 20
	return c
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: sarama BOOTSTRAP SCENARIO [flags]")
		os.Exit(2)
	}
	bootstrap, scenario := os.Args[1], os.Args[2]
	flags := flag.NewFlagSet(scenario, flag.ExitOnError)
	topic := flags.String("topic", "", "topic")
	group := flags.String("group", "", "consumer group")
	count := flags.Int("count", 0, "records")
	prefix := flags.String("prefix", "sarama", "key/value prefix")
	partitions := flags.Int("partitions", 3, "partitions of the created topic")
	timeout := flags.Duration("timeout", 40*time.Second, "give up after")
	if err := flags.Parse(os.Args[3:]); err != nil {
		fatal("%v", err)
	}
	addrs := []string{bootstrap}
	switch scenario {
	case "produce":
		produce(addrs, *topic, *count, *prefix)
	case "consume":
		consume(addrs, *topic, *group, *count, *timeout)
	case "create", "describe", "describe-config", "delete":
		admin(addrs, scenario, *topic, *partitions)
	default:
		fatal("unknown scenario %q", scenario)
	}
}

func produce(addrs []string, topic string, count int, prefix string) {
	c := config("sarama-producer")
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Retry.Max = 5
	c.Producer.Return.Successes = true
	c.Producer.Partitioner = sarama.NewHashPartitioner
	c.Net.MaxOpenRequests = 1
	producer, err := sarama.NewSyncProducer(addrs, c)
	if err != nil {
		fatal("new producer: %v", err)
	}
	messages := make([]*sarama.ProducerMessage, count)
	for i := range messages {
		messages[i] = &sarama.ProducerMessage{
			Topic:   topic,
			Key:     sarama.StringEncoder(fmt.Sprintf("%s-key-%d", prefix, i)),
			Value:   sarama.StringEncoder(fmt.Sprintf("%s-value-%d", prefix, i)),
			Headers: []sarama.RecordHeader{{Key: []byte("seq"), Value: []byte(strconv.Itoa(i))}},
		}
	}
	if err := producer.SendMessages(messages); err != nil {
		fatal("send: %v", err)
	}
	for _, m := range messages {
		key, _ := m.Key.Encode()
		value, _ := m.Value.Encode()
		emit(map[string]interface{}{
			"key": string(key), "value": string(value), "partition": m.Partition, "offset": m.Offset,
		})
	}
	if err := producer.Close(); err != nil {
		fatal("close: %v", err)
	}
}

// handler hands every claimed record to the consume loop, marking it consumed.
type handler struct {
	mu     sync.Mutex
	seen   int
	want   int
	cancel context.CancelFunc
}

func (h *handler) Setup(s sarama.ConsumerGroupSession) error {
	emit(map[string]interface{}{"event": "assigned", "generation": s.GenerationID(), "claims": s.Claims()})
	return nil
}

func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		headers := map[string]string{}
		for _, hd := range m.Headers {
			headers[string(hd.Key)] = string(hd.Value)
		}
		emit(map[string]interface{}{
			"key": string(m.Key), "value": string(m.Value), "partition": m.Partition, "offset": m.Offset,
			"headers": headers,
		})
		s.MarkMessage(m, "")
		h.mu.Lock()
		h.seen++
		if h.seen >= h.want {
			h.cancel()
		}
		h.mu.Unlock()
	}
	return nil
}

func consume(addrs []string, topic, group string, count int, timeout time.Duration) {
	c := config("sarama-consumer")
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.Retention = 24 * time.Hour // OffsetCommit v2 (see the package comment)
	c.Consumer.Offsets.CommitInterval = 200 * time.Millisecond
	c.Consumer.Return.Errors = true
	c.Consumer.Group.Rebalance.Strategy = sarama.BalanceStrategyRange
	cg, err := sarama.NewConsumerGroup(addrs, group, c)
	if err != nil {
		fatal("new consumer group: %v", err)
	}
	go func() {
		for err := range cg.Errors() {
			emit(map[string]interface{}{"event": "error", "error": err.Error()})
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	h := &handler{want: count, cancel: cancel}
	for ctx.Err() == nil {
		if err := cg.Consume(ctx, []string{topic}, h); err != nil {
			emit(map[string]interface{}{"event": "consume-error", "error": err.Error()})
			time.Sleep(200 * time.Millisecond)
		}
	}
	timedOut := ctx.Err() == context.DeadlineExceeded
	if err := cg.Close(); err != nil {
		fatal("close: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	emit(map[string]interface{}{"event": "closed", "consumed": h.seen, "timed_out": timedOut})
}

func admin(addrs []string, scenario, topic string, partitions int) {
	c := config("sarama-admin")
	ca, err := sarama.NewClusterAdmin(addrs, c)
	if err != nil {
		fatal("new cluster admin: %v", err)
	}
	defer ca.Close()
	switch scenario {
	case "create":
		retention := "3600000"
		err = ca.CreateTopic(topic, &sarama.TopicDetail{
			NumPartitions:     int32(partitions),
			ReplicationFactor: 1,
			ConfigEntries:     map[string]*string{"retention.ms": &retention},
		}, false)
		emit(map[string]interface{}{"op": "create", "error": errText(err)})
		err = ca.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false)
		emit(map[string]interface{}{"op": "create-again", "error": errText(err)})
	case "describe":
		describe(ca, topic, "describe")
	case "describe-config":
		// DescribeConfigs v0: the only version sarama 1.22 sends, removed in Kafka 4.0 (KIP-896).
		entries, err := ca.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
		configs := map[string]string{}
		for _, e := range entries {
			configs[e.Name] = e.Value
		}
		emit(map[string]interface{}{"op": "describe-config", "error": errText(err), "configs": configs})
	case "delete":
		err = ca.DeleteTopic(topic)
		emit(map[string]interface{}{"op": "delete", "error": errText(err)})
		deadline := time.Now().Add(15 * time.Second)
		for {
			metadata, err := ca.DescribeTopics([]string{topic})
			if err != nil || len(metadata) != 1 || metadata[0].Err == sarama.ErrUnknownTopicOrPartition ||
				time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		describe(ca, topic, "describe-deleted")
	}
}

// describe prints the topic's partitions as DescribeTopics (Metadata v5) reports them.
func describe(ca sarama.ClusterAdmin, topic, op string) {
	metadata, err := ca.DescribeTopics([]string{topic})
	line := map[string]interface{}{"op": op, "error": errText(err)}
	if err == nil && len(metadata) == 1 {
		ids := []int32{}
		for _, p := range metadata[0].Partitions {
			ids = append(ids, p.ID)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		line["name"] = metadata[0].Name
		line["topic_error"] = int16(metadata[0].Err)
		line["partitions"] = ids
	}
	emit(line)
}
