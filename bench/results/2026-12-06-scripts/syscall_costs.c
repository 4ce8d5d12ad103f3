#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <time.h>
#include <string.h>
#include <stdint.h>
#include <signal.h>
#include <sys/wait.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
#define N 20000
int main(){
  const char *ext="/mnt/benchfs/mb"; mkdir(ext,0700); /* the loop device of docs/performance.md */
  char p[256]; snprintf(p,sizeof p,"%s/state/spend.jsonl",ext); mkdir("/mnt/benchfs/mb/state",0700);
  int fd=open(p,O_CREAT|O_WRONLY|O_APPEND,0600);
  struct statx sx; double t=now();
  for(int i=0;i<N;i++) statx(AT_FDCWD,p,AT_SYMLINK_NOFOLLOW,STATX_ALL,&sx);
  printf("statx ext4 path: %.2f us\n",(now()-t)/N*1e6);
  t=now(); for(int i=0;i<N;i++){flock(fd,LOCK_SH|LOCK_NB);flock(fd,LOCK_UN);} printf("flock pair: %.2f us\n",(now()-t)/N*1e6);
  t=now(); for(int i=0;i<N;i++) write(fd,"{\"at\":1796559426.7308993,\"runner\":\"fake\",\"ok\":true}\n",52); printf("append 52B: %.2f us\n",(now()-t)/N*1e6);
  t=now(); for(int i=0;i<N;i++) geteuid(); printf("geteuid: %.2f us\n",(now()-t)/N*1e6);
  const char *sh="/dev/shm/mbdir"; mkdir(sh,0700);
  char a[256],b[256];
  t=now(); for(int i=0;i<N;i++){snprintf(a,sizeof a,"%s/x%d",sh,i); mkdir(a,0700); rmdir(a);} printf("mkdir+rmdir tmpfs: %.2f us\n",(now()-t)/N*1e6);
  t=now(); for(int i=0;i<N;i++){snprintf(a,sizeof a,"%s/.new-x%d",sh,i); snprintf(b,sizeof b,"%s/x%d",sh,i); mkdir(a,0700); int d=open(a,O_RDONLY|O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC); flock(d,LOCK_EX|LOCK_NB); renameat2(AT_FDCWD,a,AT_FDCWD,b,RENAME_NOREPLACE); rmdir(b); close(d);} printf("mkdir+open+flock+rename+rmdir+close tmpfs: %.2f us\n",(now()-t)/N*1e6);
  /* A live child, so the children list is not empty (as a supervisor's, with its runner). */
  pid_t kid=fork(); if(kid==0){pause();_exit(0);}
  t=now(); for(int i=0;i<N;i++){int d=open("/proc/thread-self/children",O_RDONLY|O_CLOEXEC); char buf[64]; read(d,buf,64); close(d);} printf("proc children open+read+close: %.2f us\n",(now()-t)/N*1e6);
  t=now(); for(int i=0;i<N;i++){int d=open("/proc/thread-self/children",O_RDONLY|O_CLOEXEC); char buf[64]; read(d,buf,64); read(d,buf,64); close(d);} printf("proc children open+read+read(EOF)+close: %.2f us\n",(now()-t)/N*1e6);
  int cf=open("/proc/thread-self/children",O_RDONLY|O_CLOEXEC); char one[64]; ssize_t got=pread(cf,one,64,0);
  t=now(); for(int i=0;i<N;i++){char buf[64]; pread(cf,buf,64,0);} printf("proc children one pread on a kept fd (%zd bytes): %.2f us\n",got,(now()-t)/N*1e6);
  kill(kid,SIGKILL); waitpid(kid,0,0);
  return 0;}
