# One-off script of run d (bench/results/HISTORY.md), kept as the record of how its figures
# were taken: microseconds per create, write of 100 bytes and unlink of a file in the folder
# given (a filesystem's cost of the queue protocol's files). It imports bench/run.py from this
# checkout (whose helpers may have changed since run d); /mnt/benchfs is that session's
# journaled ext4 (docs/performance.md says how to make one).
import os,time,tempfile,sys
d=tempfile.mkdtemp(dir=sys.argv[1])
t=time.perf_counter()
for i in range(3000):
    p=f"{d}/f{i}"; fd=os.open(p,os.O_CREAT|os.O_WRONLY,0o600); os.write(fd,b"x"*100); os.close(fd); os.unlink(p)
print(sys.argv[1], (time.perf_counter()-t)/3000*1e6, "us per create+write+unlink")
os.rmdir(d)
