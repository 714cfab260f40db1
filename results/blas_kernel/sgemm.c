#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cblas.h>
extern void openblas_set_num_threads(int);
extern char* openblas_get_corename(void);
extern char* openblas_get_config(void);
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(){int M=512,K=1536,N=8960;float*a=malloc(4L*M*K),*b=malloc(4L*K*N),*c=malloc(4L*M*N);
for(long i=0;i<(long)M*K;i++)a[i]=rand()/(float)RAND_MAX;for(long i=0;i<(long)K*N;i++)b[i]=rand()/(float)RAND_MAX;
printf("%s | %s\n",openblas_get_corename(),openblas_get_config());
for(int th=1;th<=2;th++){openblas_set_num_threads(th);double best=1e9;for(int r=0;r<4;r++){double t=now();
cblas_sgemm(CblasRowMajor,CblasNoTrans,CblasNoTrans,M,N,K,1,a,K,b,N,0,c,N);t=now()-t;if(t<best)best=t;}
printf("%d threads %.1f GFLOPS\n",th,2.0*M*N*K/best/1e9);}}
