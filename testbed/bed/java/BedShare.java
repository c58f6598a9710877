import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/** A share-group member (KIP-932, Kafka 4.1+ clients). A share consumer has no rebalance
 *  listener: "assigned" is printed once its first poll returns (the member has joined). */
public final class BedShare {
    public static void main(String[] argv) throws Exception {
        BedCommon c = new BedCommon(argv);
        Properties p = c.base();
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(p);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try { main.join(20000); } catch (InterruptedException ignored) { }
        }));
        consumer.subscribe(Arrays.asList(c.args.get("topics").split(",")));
        c.emit("started", "\"library\":\"java-share\"");
        long total = 0;
        boolean joined = false;
        try {
            while (!c.close) {
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(200));
                total += recs.count();
                if (!joined) {
                    c.emit("assigned", "\"partitions\":" + BedCommon.names(consumer.subscription()));
                    joined = true;
                }
                if (recs.count() > 0) c.emit("consumed", "\"total\":" + total);
            }
        } catch (org.apache.kafka.common.errors.WakeupException e) {
            // SIGTERM
        }
        consumer.close();
        c.emit("closed", null);
    }
}
