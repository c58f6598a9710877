import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;

/** Shared by the Java members of the kafkabed test bed: arguments and the JSON event lines. */
public final class BedCommon {
    public final Map<String, String> args = new HashMap<>();
    public volatile boolean close = false;

    public BedCommon(String[] argv) {
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> close = true));
    }

    public String get(String key, String dflt) {
        return args.getOrDefault(key, dflt);
    }

    public boolean stopPolling() {
        String f = args.get("stop-file");
        return f != null && Files.exists(Paths.get(f));
    }

    public Properties base() {
        Properties p = new Properties();
        p.put("bootstrap.servers", args.get("bootstrap"));
        p.put("group.id", args.get("group"));
        p.put("client.id", args.get("client-id"));
        // --prop key=value,key=value: more client settings
        String extra = args.get("props");
        if (extra != null && !extra.isEmpty()) {
            for (String kv : extra.split(",")) {
                String[] parts = kv.split("=", 2);
                p.put(parts[0], parts[1]);
            }
        }
        return p;
    }

    public static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    public static String names(Collection<?> parts) {
        StringBuilder sb = new StringBuilder("[");
        for (String n : new TreeSet<>(parts.stream().map(Object::toString).toList())) {
            if (sb.length() > 1) sb.append(",");
            sb.append(quote(n));
        }
        return sb.append("]").toString();
    }

    public synchronized void emit(String event, String extraJson) {
        String line = "{\"event\":" + quote(event) + ",\"ts_ms\":" + System.currentTimeMillis()
            + ",\"pid\":" + ProcessHandle.current().pid() + ",\"client_id\":" + quote(args.get("client-id"))
            + (extraJson == null || extraJson.isEmpty() ? "" : "," + extraJson) + "}";
        System.out.println(line);
        System.out.flush();
    }
}
