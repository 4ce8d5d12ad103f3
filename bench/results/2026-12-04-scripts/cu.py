# One-off script of run d (docs/performance.md), kept as the record of how its figures were taken.
# Paths are this session's (/work/main, /mnt/benchfs); run from anywhere with python3.
import os,time,tempfile,sys
d=tempfile.mkdtemp(dir=sys.argv[1])
t=time.perf_counter()
for i in range(3000):
    p=f"{d}/f{i}"; fd=os.open(p,os.O_CREAT|os.O_WRONLY,0o600); os.write(fd,b"x"*100); os.close(fd); os.unlink(p)
print(sys.argv[1], (time.perf_counter()-t)/3000*1e6, "us per create+write+unlink")
os.rmdir(d)
