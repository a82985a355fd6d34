/*
 * Removes the ephemeral nodes a killed Pulsar standalone left in its RocksDB metadata
 * store, as a ZooKeeper session expiry would, before the standalone starts again.
 *
 * Pulsar's RocksdbMetadataStore keeps ephemeral nodes across a crash and deletes those of
 * an earlier instance lazily, on a read. When that lazy delete of the dead bookie's
 * registration (/ledgers/available/<bookie>) races the new bookie's ResourceLock, the
 * lock can livelock (invalidated, deleted, re-acquired, thousands of times a second) and
 * the broker sees no writable bookie for minutes. Run with the Pulsar jars on the class
 * path (Java's single-file source launcher):
 *
 *     java -cp 'lib/*' DropEphemerals.java <data>/metadata
 *
 * Prints one line: how many ephemeral nodes were removed, and their paths.
 * The value layout is RocksdbMetadataStore.MetaValue (format version 1): int header
 * size, int format version, long version, long owner, long created, long modified,
 * byte ephemeral, data.
 */
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.rocksdb.Options;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksIterator;
import org.rocksdb.TransactionDB;
import org.rocksdb.TransactionDBOptions;
import org.rocksdb.WriteOptions;

public class DropEphemerals {
    private static final int EPHEMERAL_AT = 4 + 4 + 8 + 8 + 8 + 8;

    static boolean ephemeral(byte[] value) {
        if (value == null || value.length < 8) {
            return false;
        }
        ByteBuffer buf = ByteBuffer.wrap(value);
        int headerSize = buf.getInt();
        int format = buf.getInt();
        return format >= 1 && headerSize > EPHEMERAL_AT && value.length > EPHEMERAL_AT
                && value[EPHEMERAL_AT] != 0;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: DropEphemerals <metadata store directory>");
            System.exit(2);
        }
        RocksDB.loadLibrary();
        List<String> removed = new ArrayList<>();
        try (Options options = new Options().setCreateIfMissing(false);
             TransactionDBOptions txOptions = new TransactionDBOptions();
             TransactionDB db = TransactionDB.open(options, txOptions, args[0]);
             WriteOptions sync = new WriteOptions().setSync(true)) {
            List<byte[]> keys = new ArrayList<>();
            try (RocksIterator it = db.newIterator()) {
                for (it.seekToFirst(); it.isValid(); it.next()) {
                    byte[] key = it.key();
                    if (key.length > 0 && key[0] == '/' && ephemeral(it.value())) {
                        keys.add(key);
                    }
                }
            }
            for (byte[] key : keys) {
                db.delete(sync, key);
                removed.add(new String(key, StandardCharsets.UTF_8));
            }
        }
        System.out.println("removed " + removed.size() + " ephemeral node(s): " + removed);
    }
}
