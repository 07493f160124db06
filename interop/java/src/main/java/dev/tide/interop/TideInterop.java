package dev.tide.interop;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.errors.PreferredLeaderNotAvailableException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * Runs the official Java client, unchanged, against a tide cluster: the
 * Admin client creates and describes a topic, an idempotent acks=all
 * producer writes keyed records with headers, and partition-assigned
 * consumers (no group: tide has no group coordinator) read every record
 * back and compare it, field by field, with what was acknowledged.
 *
 * <p>Prints "tide-interop producing N records" when it starts sending,
 * then one line beginning "tide-interop ok" and exits 0, or a line
 * beginning "tide-interop FAILED" on stderr and exits 1 (2 for bad
 * arguments). internal/server/java_test.go runs it against three
 * {@code tide serve} processes.
 */
public final class TideInterop {
    private final Options options;
    /** How many times the producer resent a batch (record-retry-total). */
    private long retries;

    private TideInterop(Options options) {
        this.options = options;
    }

    public static void main(String[] args) {
        Options options;
        try {
            options = Options.parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("tide-interop: " + e.getMessage());
            System.err.println(Options.USAGE);
            System.exit(2);
            return;
        }
        try {
            System.out.println(new TideInterop(options).run());
            System.exit(0);
        } catch (Failure e) {
            System.err.println("tide-interop FAILED: " + e.getMessage());
        } catch (Exception e) {
            System.err.println("tide-interop FAILED: unexpected " + e);
            e.printStackTrace();
        }
        System.exit(1);
    }

    private String run() throws Exception {
        long deadlineNanos = System.nanoTime() + TimeUnit.SECONDS.toNanos(options.timeoutSeconds);
        int brokers;
        try (Admin admin = Admin.create(adminProperties())) {
            brokers = createAndDescribe(admin, deadlineNanos);
        }
        Map<Integer, List<Sent>> sent = produce();
        List<TopicPartition> partitions = new ArrayList<>();
        for (int partition : sent.keySet()) {
            partitions.add(new TopicPartition(options.topic, partition));
        }
        try (Admin admin = Admin.create(adminProperties())) {
            checkAdminOffsets(admin, partitions, sent, deadlineNanos);
            electPreferred(admin, partitions, deadlineNanos);
        }
        int uncommitted = consume(partitions, sent, "read_uncommitted", deadlineNanos);
        int committed = consume(partitions, sent, "read_committed", deadlineNanos);
        StringBuilder perPartition = new StringBuilder();
        for (Map.Entry<Integer, List<Sent>> entry : sent.entrySet()) {
            if (perPartition.length() > 0) {
                perPartition.append(',');
            }
            perPartition.append(entry.getKey()).append(':').append(entry.getValue().size());
        }
        return String.format("tide-interop ok kafka-clients=%s topic=%s brokers=%d partitions=%d replication-factor=%d"
                + " min-insync-replicas=%s produced=%d producer-retries=%d per-partition=%s consumed-read-uncommitted=%d"
                + " consumed-read-committed=%d",
                AppInfoParser.getVersion(), options.topic, brokers, options.partitions, options.replicationFactor,
                options.minInsyncReplicas == null ? "default" : options.minInsyncReplicas, options.records, retries,
                perPartition, uncommitted, committed);
    }

    private Properties common(String clientId) {
        Properties properties = new Properties();
        properties.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, options.bootstrap);
        properties.put(AdminClientConfig.CLIENT_ID_CONFIG, clientId);
        return properties;
    }

    private Properties adminProperties() {
        return common("tide-interop-admin");
    }

    /**
     * Creates the topic, then waits until every partition has a leader and
     * all its replicas, lists topics, describes the cluster and reads the
     * topic's min.insync.replicas back. Returns the number of brokers.
     */
    private int createAndDescribe(Admin admin, long deadlineNanos) throws Exception {
        NewTopic topic = new NewTopic(options.topic, options.partitions, (short) options.replicationFactor);
        if (options.minInsyncReplicas != null) {
            topic.configs(Map.of("min.insync.replicas", options.minInsyncReplicas));
        }
        get(admin.createTopics(List.of(topic)).all(), deadlineNanos, "CreateTopics");

        TopicDescription description = describeUntilReady(admin, deadlineNanos);
        if (description.partitions().size() != options.partitions) {
            throw new Failure("DescribeTopics: " + description.partitions().size() + " partitions, want " + options.partitions);
        }
        Collection<String> names = get(admin.listTopics().names(), deadlineNanos, "ListTopics");
        if (!names.contains(options.topic)) {
            throw new Failure("ListTopics: " + names + " lacks " + options.topic);
        }
        DescribeClusterResult cluster = admin.describeCluster();
        int brokers = get(cluster.nodes(), deadlineNanos, "DescribeCluster nodes").size();
        String clusterId = get(cluster.clusterId(), deadlineNanos, "DescribeCluster cluster id");
        if (clusterId == null || clusterId.isEmpty()) {
            throw new Failure("DescribeCluster: no cluster id");
        }
        if (brokers < options.replicationFactor) {
            throw new Failure("DescribeCluster: " + brokers + " brokers, fewer than replication factor " + options.replicationFactor);
        }
        if (options.minInsyncReplicas != null) {
            checkMinInsync(admin, deadlineNanos);
        }
        return brokers;
    }

    /**
     * A broker answers CreateTopics once its own metadata has the topic; the
     * next Metadata may go to another broker that learns of it a moment
     * later, so UNKNOWN_TOPIC_OR_PARTITION and missing leaders are retried
     * until the deadline.
     */
    private TopicDescription describeUntilReady(Admin admin, long deadlineNanos) throws Exception {
        String last = "no answer";
        while (System.nanoTime() < deadlineNanos) {
            try {
                TopicDescription description =
                        get(admin.describeTopics(List.of(options.topic)).allTopicNames(), deadlineNanos, "DescribeTopics")
                                .get(options.topic);
                String problem = replicaProblem(description);
                if (problem == null) {
                    return description;
                }
                last = problem;
            } catch (Failure e) {
                if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) {
                    throw e;
                }
                last = e.getMessage();
            }
            Thread.sleep(100);
        }
        throw new Failure("DescribeTopics: topic not ready before the deadline: " + last);
    }

    private String replicaProblem(TopicDescription description) {
        for (TopicPartitionInfo partition : description.partitions()) {
            if (partition.leader() == null || partition.leader().isEmpty()) {
                return "partition " + partition.partition() + " has no leader";
            }
            if (partition.replicas().size() != options.replicationFactor) {
                return "partition " + partition.partition() + " has replicas " + partition.replicas();
            }
            if (partition.isr().size() != options.replicationFactor) {
                return "partition " + partition.partition() + " has ISR " + partition.isr();
            }
        }
        return null;
    }

    private void checkMinInsync(Admin admin, long deadlineNanos) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, options.topic);
        Config config = get(admin.describeConfigs(List.of(resource)).all(), deadlineNanos, "DescribeConfigs").get(resource);
        if (config == null || config.get("min.insync.replicas") == null) {
            throw new Failure("DescribeConfigs: no min.insync.replicas for " + options.topic);
        }
        String value = config.get("min.insync.replicas").value();
        if (!options.minInsyncReplicas.equals(value)) {
            throw new Failure("DescribeConfigs: min.insync.replicas is " + value + ", want " + options.minInsyncReplicas);
        }
    }

    /**
     * Admin.listOffsets (ListOffsets through each partition's leader) must
     * give [0, records produced) for every partition.
     */
    private void checkAdminOffsets(Admin admin, List<TopicPartition> partitions, Map<Integer, List<Sent>> sent,
            long deadlineNanos) throws Exception {
        Map<TopicPartition, OffsetSpec> earliest = new HashMap<>();
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        for (TopicPartition partition : partitions) {
            earliest.put(partition, OffsetSpec.earliest());
            latest.put(partition, OffsetSpec.latest());
        }
        Map<TopicPartition, ListOffsetsResultInfo> start = get(admin.listOffsets(earliest).all(), deadlineNanos, "ListOffsets earliest");
        Map<TopicPartition, ListOffsetsResultInfo> end = get(admin.listOffsets(latest).all(), deadlineNanos, "ListOffsets latest");
        for (TopicPartition partition : partitions) {
            long want = sent.get(partition.partition()).size();
            if (start.get(partition).offset() != 0 || end.get(partition).offset() != want) {
                throw new Failure("Admin ListOffsets: " + partition + " [" + start.get(partition).offset() + ", "
                        + end.get(partition).offset() + "), want [0, " + want + ")");
            }
        }
    }

    /**
     * A preferred leader election: each partition answers success,
     * ELECTION_NOT_NEEDED (its preferred replica leads already) or
     * PREFERRED_LEADER_NOT_AVAILABLE (that replica is down, as after
     * java_test.go kills a leader), nothing else.
     */
    private void electPreferred(Admin admin, List<TopicPartition> partitions, long deadlineNanos) throws Exception {
        Map<TopicPartition, Optional<Throwable>> results =
                get(admin.electLeaders(ElectionType.PREFERRED, new HashSet<>(partitions)).partitions(), deadlineNanos,
                        "ElectLeaders");
        for (TopicPartition partition : partitions) {
            Optional<Throwable> result = results.get(partition);
            if (result == null) {
                throw new Failure("ElectLeaders: no answer for " + partition);
            }
            if (result.isPresent() && !(result.get() instanceof ElectionNotNeededException)
                    && !(result.get() instanceof PreferredLeaderNotAvailableException)) {
                throw new Failure("ElectLeaders: " + partition + ": " + result.get());
            }
        }
    }

    /** One acknowledged record: what was sent and where the broker put it. */
    private record Sent(byte[] key, byte[] value, List<Header> headers, long offset, long timestamp) {
    }

    /**
     * Produces the records with the client's idempotent acks=all producer
     * and returns them by partition in offset order. The topic is new, so
     * each partition's offsets must run 0, 1, 2, ... with no gap and no
     * duplicate: a duplicate would mean idempotence failed.
     */
    private Map<Integer, List<Sent>> produce() throws Exception {
        Properties properties = common("tide-interop-producer");
        properties.put(ProducerConfig.ACKS_CONFIG, "all");
        properties.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        properties.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none");
        properties.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        properties.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        properties.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        properties.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        List<Future<RecordMetadata>> acknowledgements = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(properties)) {
            List<PartitionInfo> partitions = producer.partitionsFor(options.topic);
            if (partitions.size() != options.partitions) {
                throw new Failure("producer metadata: " + partitions.size() + " partitions, want " + options.partitions);
            }
            // A line the caller can act on (java_test.go kills a leader
            // once it sees it, when the sends are paced).
            System.out.println("tide-interop producing " + options.records + " records");
            System.out.flush();
            for (int i = 0; i < options.records; i++) {
                ProducerRecord<byte[], byte[]> record = newRecord(i);
                records.add(record);
                acknowledgements.add(producer.send(record));
                if (options.paceMillis > 0) {
                    Thread.sleep(options.paceMillis);
                }
            }
            producer.flush();
            retries = (long) metric(producer.metrics(), "record-retry-total");
        }
        Map<Integer, List<Sent>> sent = new TreeMap<>();
        for (int i = 0; i < records.size(); i++) {
            RecordMetadata metadata;
            try {
                metadata = acknowledgements.get(i).get();
            } catch (ExecutionException e) {
                throw new Failure("produce of record " + i + ": " + e.getCause(), e.getCause());
            }
            ProducerRecord<byte[], byte[]> record = records.get(i);
            List<Sent> partition = sent.computeIfAbsent(metadata.partition(), p -> new ArrayList<>());
            if (metadata.offset() != partition.size()) {
                throw new Failure("produce of record " + i + ": partition " + metadata.partition() + " offset "
                        + metadata.offset() + ", want " + partition.size() + " (a gap, a duplicate or a reordering)");
            }
            partition.add(new Sent(record.key(), record.value(), Arrays.asList(record.headers().toArray()),
                    metadata.offset(), metadata.timestamp()));
        }
        if (sent.size() != options.partitions) {
            throw new Failure("produce: the keys landed on " + sent.keySet() + ", want all " + options.partitions + " partitions");
        }
        return sent;
    }

    /** The value of the producer-metrics metric with this name. */
    private static double metric(Map<MetricName, ? extends Metric> metrics, String name) {
        for (Map.Entry<MetricName, ? extends Metric> entry : metrics.entrySet()) {
            if (entry.getKey().name().equals(name) && entry.getKey().group().equals("producer-metrics")) {
                return ((Number) entry.getValue().metricValue()).doubleValue();
            }
        }
        throw new Failure("the producer has no metric " + name);
    }

    /** Record i: its key, value and headers depend on i alone. */
    private ProducerRecord<byte[], byte[]> newRecord(int i) {
        byte[] key = ("key-" + i).getBytes(StandardCharsets.UTF_8);
        byte[] value = ("value " + i + " " + "x".repeat(i % 97)).getBytes(StandardCharsets.UTF_8);
        List<Header> headers = new ArrayList<>();
        headers.add(new RecordHeader("index", Integer.toString(i).getBytes(StandardCharsets.UTF_8)));
        headers.add(new RecordHeader("sent-by", "tide-interop".getBytes(StandardCharsets.UTF_8)));
        if (i % 10 == 0) {
            headers.add(new RecordHeader("empty", new byte[0]));
            headers.add(new RecordHeader("null", null));
        }
        return new ProducerRecord<>(options.topic, null, key, value, headers);
    }

    /**
     * Reads every partition from its beginning with assign and
     * seekToBeginning (no group.id, no commits) and checks each record
     * against what the producer had acknowledged, in order. Returns the
     * number of records read.
     */
    private int consume(List<TopicPartition> partitions, Map<Integer, List<Sent>> sent, String isolation, long deadlineNanos)
            throws Exception {
        Properties properties = common("tide-interop-consumer-" + isolation);
        properties.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        properties.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        properties.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        properties.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        properties.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        Map<Integer, Integer> next = new HashMap<>();
        int read = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(properties)) {
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            checkOffsets(consumer, partitions, sent, isolation);
            while (read < options.records) {
                if (System.nanoTime() > deadlineNanos) {
                    throw new Failure(isolation + ": read " + read + " of " + options.records + " records before the deadline");
                }
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    int index = next.merge(record.partition(), 1, Integer::sum) - 1;
                    compare(isolation, record, sent.get(record.partition()), index);
                    read++;
                }
            }
            int extra = consumer.poll(Duration.ofMillis(1000)).count();
            if (extra != 0) {
                throw new Failure(isolation + ": " + extra + " records after the last one produced");
            }
        }
        return read;
    }

    private void checkOffsets(KafkaConsumer<byte[], byte[]> consumer, List<TopicPartition> partitions,
            Map<Integer, List<Sent>> sent, String isolation) {
        Duration timeout = Duration.ofSeconds(30);
        Map<TopicPartition, Long> beginning = consumer.beginningOffsets(partitions, timeout);
        Map<TopicPartition, Long> end = consumer.endOffsets(partitions, timeout);
        for (TopicPartition partition : partitions) {
            long want = sent.get(partition.partition()).size();
            if (beginning.get(partition) != 0 || end.get(partition) != want) {
                throw new Failure(isolation + ": " + partition + " offsets [" + beginning.get(partition) + ", "
                        + end.get(partition) + "), want [0, " + want + ")");
            }
        }
    }

    private static void compare(String isolation, ConsumerRecord<byte[], byte[]> record, List<Sent> partition, int index) {
        String where = isolation + ": " + record.topic() + "-" + record.partition() + " record " + index;
        if (partition == null || index >= partition.size()) {
            throw new Failure(where + " at offset " + record.offset() + " was never produced");
        }
        Sent want = partition.get(index);
        if (record.offset() != want.offset()) {
            throw new Failure(where + ": offset " + record.offset() + ", want " + want.offset());
        }
        if (!Arrays.equals(record.key(), want.key()) || !Arrays.equals(record.value(), want.value())) {
            throw new Failure(where + " at offset " + record.offset() + ": key or value differs");
        }
        if (record.timestamp() != want.timestamp()) {
            throw new Failure(where + ": timestamp " + record.timestamp() + ", acknowledged " + want.timestamp());
        }
        Header[] got = record.headers().toArray();
        if (got.length != want.headers().size()) {
            throw new Failure(where + ": " + got.length + " headers, want " + want.headers().size());
        }
        for (int i = 0; i < got.length; i++) {
            Header w = want.headers().get(i);
            if (!got[i].key().equals(w.key()) || !Arrays.equals(got[i].value(), w.value())) {
                throw new Failure(where + ": header " + i + " is " + got[i] + ", want " + w);
            }
        }
    }

    private static <T> T get(org.apache.kafka.common.KafkaFuture<T> future, long deadlineNanos, String what) throws Exception {
        long left = Math.max(1, deadlineNanos - System.nanoTime());
        try {
            return future.get(left, TimeUnit.NANOSECONDS);
        } catch (ExecutionException e) {
            throw new Failure(what + ": " + e.getCause(), e.getCause());
        } catch (TimeoutException e) {
            throw new Failure(what + ": no answer before the deadline", e);
        }
    }

    /** A check that did not hold: its message says what was expected. */
    private static final class Failure extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Failure(String message) {
            super(message);
        }

        Failure(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** The command line: every option is --name value. */
    private static final class Options {
        static final String USAGE = "usage: TideInterop --bootstrap host:port[,host:port...] --topic NAME"
                + " [--partitions 3] [--replication-factor 3] [--min-insync-replicas N] [--records 1000] [--pace-ms 0]"
                + " [--timeout-seconds 120]";
        String bootstrap;
        String topic;
        int partitions = 3;
        int replicationFactor = 3;
        String minInsyncReplicas;
        int records = 1000;
        /** Milliseconds between two sends; 0 sends as fast as the client takes them. */
        int paceMillis;
        int timeoutSeconds = 120;

        static Options parse(String[] args) {
            Options options = new Options();
            if (args.length % 2 != 0) {
                throw new IllegalArgumentException("options come in pairs: --name value");
            }
            for (int i = 0; i < args.length; i += 2) {
                String value = args[i + 1];
                switch (args[i]) {
                    case "--bootstrap" -> options.bootstrap = value;
                    case "--topic" -> options.topic = value;
                    case "--partitions" -> options.partitions = positive(args[i], value);
                    case "--replication-factor" -> options.replicationFactor = positive(args[i], value);
                    case "--min-insync-replicas" -> options.minInsyncReplicas = Integer.toString(positive(args[i], value));
                    case "--records" -> options.records = positive(args[i], value);
                    case "--pace-ms" -> options.paceMillis = positive(args[i], value);
                    case "--timeout-seconds" -> options.timeoutSeconds = positive(args[i], value);
                    default -> throw new IllegalArgumentException("unknown option " + args[i]);
                }
            }
            if (options.bootstrap == null || options.topic == null) {
                throw new IllegalArgumentException("--bootstrap and --topic are required");
            }
            if (options.replicationFactor > Short.MAX_VALUE) {
                throw new IllegalArgumentException("--replication-factor is at most " + Short.MAX_VALUE);
            }
            return options;
        }

        private static int positive(String name, String value) {
            try {
                int parsed = Integer.parseInt(value);
                if (parsed > 0) {
                    return parsed;
                }
            } catch (NumberFormatException e) {
                // reported below
            }
            throw new IllegalArgumentException(name + " wants a positive integer, not " + value);
        }
    }
}
