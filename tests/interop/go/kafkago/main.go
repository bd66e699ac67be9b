// Command kafkago drives exactly with segmentio/kafka-go 0.2.1 (Debian's
// golang-github-segmentio-kafka-go-dev) for tests/interop/test_go_clients.py.
//
// Usage: kafkago BOOTSTRAP SCENARIO [flags]
//
// Every result is one JSON object per line on stdout; a failure the scenario does not expect ends the
// program with status 1 and a {"fatal": "..."} line.
//
// kafka-go 0.2.1 predates record batches: it produces with Produce v2 (magic 1 message sets), fetches
// with Fetch v2 and creates topics with CreateTopics v0, versions that Kafka 4.0 removed (KIP-896) and
// exactly does not serve either (the broker closes the connection, as Kafka 4.0 does). Its Metadata v1,
// ListOffsets v1, DeleteTopics v1 and consumer-group requests (FindCoordinator v0, JoinGroup v1,
// SyncGroup v0, Heartbeat v0, OffsetCommit v2, LeaveGroup v0) are still served. Scenarios:
//
//	offsets  -topic T                      the topic's partitions (Metadata v1) and each one's first and
//	                                       last offsets (ListOffsets v1), one line per partition
//	commit   -topic T -group G -offsets 0:5,1:7
//	                                       a Reader with GroupID joins G and commits the given offsets
//	                                       (the next offset to read, per partition), then leaves
//	produce  -topic T -count N             a Writer produces N records; one line with the error it got
//	fetch    -topic T                      a Conn on partition 0 reads one record; one line with the error
//	create   -topic T                      Conn.CreateTopics; one line with the error
//	delete   -topic T                      Conn.DeleteTopics; one line with the error
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	kafka "github.com/segmentio/kafka-go"
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

func errText(err error) interface{} {
	if err == nil {
		return nil
	}
	return err.Error()
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: kafkago BOOTSTRAP SCENARIO [flags]")
		os.Exit(2)
	}
	bootstrap, scenario := os.Args[1], os.Args[2]
	flags := flag.NewFlagSet(scenario, flag.ExitOnError)
	topic := flags.String("topic", "", "topic")
	group := flags.String("group", "", "consumer group")
	count := flags.Int("count", 1, "records")
	offsets := flags.String("offsets", "", "partition:offset,... to commit")
	timeout := flags.Duration("timeout", 30*time.Second, "give up after")
	if err := flags.Parse(os.Args[3:]); err != nil {
		fatal("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	switch scenario {
	case "offsets":
		listOffsets(ctx, bootstrap, *topic)
	case "commit":
		commit(ctx, bootstrap, *topic, *group, *offsets)
	case "produce":
		produce(ctx, bootstrap, *topic, *count)
	case "fetch":
		fetch(ctx, bootstrap, *topic)
	case "create":
		conn := dial(bootstrap)
		err := conn.CreateTopics(kafka.TopicConfig{Topic: *topic, NumPartitions: 1, ReplicationFactor: 1})
		emit(map[string]interface{}{"op": "create", "error": errText(err)})
	case "delete":
		conn := dial(bootstrap)
		emit(map[string]interface{}{"op": "delete", "error": errText(conn.DeleteTopics(*topic))})
	default:
		fatal("unknown scenario %q", scenario)
	}
}

func dial(bootstrap string) *kafka.Conn {
	conn, err := kafka.Dial("tcp", bootstrap)
	if err != nil {
		fatal("dial: %v", err)
	}
	return conn
}

func listOffsets(ctx context.Context, bootstrap, topic string) {
	partitions, err := kafka.LookupPartitions(ctx, "tcp", bootstrap, topic)
	if err != nil {
		fatal("lookup partitions: %v", err)
	}
	sort.Slice(partitions, func(i, j int) bool { return partitions[i].ID < partitions[j].ID })
	for _, p := range partitions {
		conn, err := kafka.DialPartition(ctx, "tcp", bootstrap, p)
		if err != nil {
			fatal("dial partition %d: %v", p.ID, err)
		}
		first, last, err := conn.ReadOffsets()
		if err != nil {
			fatal("read offsets of partition %d: %v", p.ID, err)
		}
		_ = conn.Close()
		emit(map[string]interface{}{
			"partition": p.ID, "leader": p.Leader.ID, "first": first, "last": last,
		})
	}
}

func commit(ctx context.Context, bootstrap, topic, group, offsets string) {
	reader := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           []string{bootstrap},
		GroupID:           group,
		Topic:             topic,
		HeartbeatInterval: 500 * time.Millisecond,
		SessionTimeout:    10 * time.Second,
		RebalanceTimeout:  10 * time.Second,
	})
	var messages []kafka.Message
	for _, item := range strings.Split(offsets, ",") {
		fields := strings.Split(item, ":")
		if len(fields) != 2 {
			fatal("bad -offsets item %q", item)
		}
		partition, err1 := strconv.Atoi(fields[0])
		offset, err2 := strconv.ParseInt(fields[1], 10, 64)
		if err1 != nil || err2 != nil {
			fatal("bad -offsets item %q", item)
		}
		// kafka-go commits a message's offset + 1, the next one to read.
		messages = append(messages, kafka.Message{Topic: topic, Partition: partition, Offset: offset - 1})
	}
	err := reader.CommitMessages(ctx, messages...)
	emit(map[string]interface{}{"op": "commit", "error": errText(err)})
	if err := reader.Close(); err != nil {
		fatal("close: %v", err)
	}
}

func produce(ctx context.Context, bootstrap, topic string, count int) {
	writer := kafka.NewWriter(kafka.WriterConfig{
		Brokers:      []string{bootstrap},
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		MaxAttempts:  2,
		BatchTimeout: 10 * time.Millisecond,
		ReadTimeout:  5 * time.Second,
		WriteTimeout: 5 * time.Second,
	})
	messages := make([]kafka.Message, count)
	for i := range messages {
		messages[i] = kafka.Message{
			Key:   []byte(fmt.Sprintf("kafkago-key-%d", i)),
			Value: []byte(fmt.Sprintf("kafkago-value-%d", i)),
		}
	}
	err := writer.WriteMessages(ctx, messages...)
	emit(map[string]interface{}{"op": "produce", "error": errText(err)})
	_ = writer.Close()
}

func fetch(ctx context.Context, bootstrap, topic string) {
	conn, err := kafka.DialLeader(ctx, "tcp", bootstrap, topic, 0)
	if err != nil {
		fatal("dial leader: %v", err)
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	message, err := conn.ReadMessage(1 << 20)
	line := map[string]interface{}{"op": "fetch", "error": errText(err)}
	if err == nil {
		line["key"], line["value"], line["offset"] = string(message.Key), string(message.Value), message.Offset
	}
	emit(line)
	_ = conn.Close()
}
