import java.time.Duration;
import java.util.Arrays;
import java.util.Collection;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/** The official Java consumer as a kafkabed member (classic or KIP-848 protocol); same event
 *  lines and behaviours as member.py: --stop-file stops polling while it exists, --slow-ms sleeps per batch,
 *  SIGTERM closes gracefully. */
public final class BedMember {
    public static void main(String[] argv) throws Exception {
        BedCommon c = new BedCommon(argv);
        Properties p = c.base();
        String protocol = c.get("protocol", "classic");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("auto.offset.reset", "earliest");
        p.put("auto.commit.interval.ms", "1000");
        p.put("max.poll.interval.ms", c.get("max-poll-interval-ms", "300000"));
        if (protocol.equals("consumer")) {
            p.put("group.protocol", "consumer");
        } else {
            p.put("session.timeout.ms", c.get("session-timeout-ms", "6000"));
            p.put("heartbeat.interval.ms", c.get("heartbeat-interval-ms", "500"));
        }
        if (c.args.containsKey("instance-id")) p.put("group.instance.id", c.args.get("instance-id"));
        long slow = Long.parseLong(c.get("slow-ms", "0"));
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try { main.join(20000); } catch (InterruptedException ignored) { }
        }));
        consumer.subscribe(Arrays.asList(c.args.get("topics").split(",")), new ConsumerRebalanceListener() {
            public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                c.emit("revoked", "\"partitions\":" + BedCommon.names(parts));
            }
            public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                c.emit("assigned", "\"partitions\":" + BedCommon.names(parts));
            }
            public void onPartitionsLost(Collection<TopicPartition> parts) {
                c.emit("lost", "\"partitions\":" + BedCommon.names(parts));
            }
        });
        c.emit("started", "\"library\":\"java\"");
        long total = 0, lastReport = 0;
        boolean announced = false;
        try {
            while (!c.close) {
                if (c.stopPolling()) {
                    if (!announced) { c.emit("stopped_polling", null); announced = true; }
                    Thread.sleep(50);
                    continue;
                }
                if (announced) { c.emit("resumed_polling", null); announced = false; }
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(200));
                total += recs.count();
                if (recs.count() > 0 && slow > 0) Thread.sleep(slow);
                if (recs.count() > 0 && System.currentTimeMillis() - lastReport > 1000) {
                    c.emit("consumed", "\"total\":" + total);
                    lastReport = System.currentTimeMillis();
                }
            }
        } catch (org.apache.kafka.common.errors.WakeupException e) {
            // SIGTERM: fall through to close
        } catch (InterruptedException e) {
            // same
        }
        consumer.close();
        c.emit("closed", null);
    }
}
